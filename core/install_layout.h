#pragma once
// Where a QuintNet executable finds its files at run time: next to itself, never at a
// path compiled in, so an installed prefix, an extracted .deb or a moved build tree
// all work.  The layout is the same in all three:
//   <prefix>/bin/quintnet, quintnet-train, ...
//   <prefix>/share/quintnet/data      MNIST, the Brown corpus, GPT-2's BPE files
// (a build tree links <build>/share/quintnet/data to the source's data/ at configure
// time; `cmake --install` copies it).
#include <string>

namespace quintnet::core {

// The folder of the running executable (/proc/self/exe), "." if it cannot be read.
std::string executable_dir();

// $QN_DATA_DIR when set, else <executable_dir>/../share/quintnet/data.
std::string data_dir();

}  // namespace quintnet::core
