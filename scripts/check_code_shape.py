#!/usr/bin/env python3
"""The code's shape, checked: function length, the layering of DESIGN.md, unity-safe names.

  python3 scripts/check_code_shape.py            # both checks; exit 1 on a violation
  python3 scripts/check_code_shape.py --lengths  # every function over 40 lines, longest first

1. Every function body in core/, exec/, sim/, visualizer/ and python/ is at most 80
   lines (docs/ARCHITECTURE.md).  A brace-initialised table of data (`... = {`) is data,
   not a function, and may be longer.
2. Includes go down the floors only: core includes no exec/sim/visualizer/python and no
   LibTorch, Qt or SimGrid; sim and the visualizer include no exec; inside exec, each
   folder includes only the folders below it (EXEC_FLOORS).
3. A library built as unity files (UNITY_BUILD in its CMakeLists.txt) names each internal
   function (in an anonymous namespace, or static) once: two files compiled into one unity
   file would otherwise overload each other's helpers, and a call could silently take the
   other file's.

A plain scanner, not a compiler: comments, strings and character literals are blanked,
then braces are matched; a brace opens a function when the text before it (back to the
previous `;`, `{` or `}`) has a parameter list and is no class, namespace, enum or
initialiser.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CODE_DIRS = ["core", "exec", "sim", "visualizer", "python"]
MAX_LINES = 80

# exec's folders, lowest floor first: a folder may include its own and lower floors only.
EXEC_FLOORS = [
    {"launch", "text", "kernels"},
    {"comm", "data", "trace"},
    {"precision"},
    {"tp", "cp"},
    {"models"},
    {"dp"},
    {"parallel"},
    {"pp"},
    {"checkpoint"},
    {"train", "generate", "examples", "cuda"},
]


def sources():
    for top in CODE_DIRS:
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            for name in sorted(files):
                if name.endswith((".cpp", ".h")):
                    yield os.path.join(folder, name)


def blank_literals(text):
    """Comments, strings and char literals replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (j + 1 - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def opens_function(header):
    header = re.sub(r"\s+", " ", header).strip()
    if not header or "(" not in header:
        return False
    if re.match(r"^(template ?<.*> ?)?(class|struct|union|enum|namespace)\b", header):
        return False
    if re.search(r"(^|[^=!<>])=\s*$", header) or header.endswith("return"):
        return False  # an initialiser: `table = {`, `return {`
    # The parameter list closes before the body: `f(...) const {`, `X::X(...) : a_(b) {`,
    # a lambda's `[&](int i) {`; a call's braced argument (`f(x, {`) is not a body.
    return header.count("(") == header.count(")")


PREPROCESSOR = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.M)


def functions(path):
    """(first line, last line) of each outermost function body: its braces' lines."""
    text = blank_literals(open(path, encoding="utf-8").read())
    text = PREPROCESSOR.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    result, depth, func_depth, start, last_boundary = [], 0, None, 0, 0
    for i, c in enumerate(text):
        if c == "{":
            if func_depth is None and opens_function(text[last_boundary:i]):
                func_depth, start = depth, i
            depth += 1
            last_boundary = i + 1
        elif c == "}":
            depth -= 1
            if func_depth is not None and depth == func_depth:
                first = text.count("\n", 0, start) + 1
                result.append((first, text.count("\n", 0, i) + 1))
                func_depth = None
            last_boundary = i + 1
        elif c == ";":
            last_boundary = i + 1
    return result


def check_lengths(report_over=None):
    long = []
    for path in sources():
        for first, last in functions(path):
            lines = last - first + 1  # from the line that opens the body to the one that closes it
            if lines > (report_over if report_over is not None else MAX_LINES):
                long.append((lines, os.path.relpath(path, ROOT), first))
    return sorted(long, reverse=True)


INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)


def floor_of(folder):
    for level, folders in enumerate(EXEC_FLOORS):
        if folder in folders:
            return level
    return None


def check_layers():
    bad = []
    for path in sources():
        rel = os.path.relpath(path, ROOT)
        parts = rel.split(os.sep)
        for inc in INCLUDE.findall(open(path, encoding="utf-8").read()):
            top = inc.split("/")[0]
            if parts[0] == "core" and (top in ("exec", "sim", "visualizer", "python") or
                                       inc.startswith(("torch/", "ATen/", "c10/", "Q", "simgrid/"))):
                bad.append(f"{rel}: includes {inc} (core includes no backend, LibTorch, Qt or SimGrid)")
            if parts[0] in ("sim", "visualizer") and top == "exec":
                bad.append(f"{rel}: includes {inc} ({parts[0]} includes nothing of exec)")
            if parts[0] == "exec" and top == "exec" and len(parts) > 2:
                mine, theirs = floor_of(parts[1]), floor_of(inc.split("/")[1])
                if mine is None or theirs is None:
                    bad.append(f"{rel}: includes {inc} (a folder of exec not in EXEC_FLOORS)")
                elif theirs > mine:
                    bad.append(f"{rel}: includes {inc} (exec/{parts[1]} sits below exec/{inc.split('/')[1]})")
    return bad


UNITY_LIBRARIES = [("exec/CMakeLists.txt", "quintnet_exec")]


def unity_sources(cmake_file, target):
    """The .cpp files of `add_library(TARGET ...)` in CMAKE_FILE, as paths from the root."""
    text = open(os.path.join(ROOT, cmake_file), encoding="utf-8").read()
    listing = re.search(r"add_library\(" + target + r"\b([^)]*)\)", text).group(1)
    folder = os.path.dirname(cmake_file)
    return [os.path.join(folder, name) for name in re.findall(r"[\w/]+\.cpp", listing)]


def internal_functions(path):
    """Names of the functions a file defines in an anonymous namespace or as static."""
    text = blank_literals(open(path, encoding="utf-8").read())
    text = PREPROCESSOR.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    names, scopes, last_boundary = set(), [], 0  # scopes: "anonymous", "namespace" or "other"
    for i, c in enumerate(text):
        if c == "{":
            header = re.sub(r"\s+", " ", text[last_boundary:i]).strip()
            at_namespace_scope = all(scope != "other" for scope in scopes)
            if re.match(r"^(inline )?namespace$", header):
                scopes.append("anonymous")
            elif re.match(r"^(inline )?namespace\b", header):
                scopes.append("namespace")
            else:
                internal = "anonymous" in scopes or header.startswith("static ")
                name = re.search(r"(\w+)\s*\(", header) if opens_function(header) else None
                if at_namespace_scope and internal and name and not header.startswith("operator"):
                    names.add(name.group(1))
                scopes.append("other")
            last_boundary = i + 1
        elif c == "}":
            scopes.pop()
            last_boundary = i + 1
        elif c == ";":
            last_boundary = i + 1
    return names


def check_unity_names():
    bad = []
    for cmake_file, target in UNITY_LIBRARIES:
        defined_in = {}
        for rel in unity_sources(cmake_file, target):
            for name in internal_functions(os.path.join(ROOT, rel)):
                defined_in.setdefault(name, []).append(rel)
        for name, files in sorted(defined_in.items()):
            if len(files) > 1:
                bad.append(f"{files[1]}: internal function '{name}' also in {', '.join([files[0]] + files[2:])} "
                           f"({target} is a unity build: give each its own name)")
    return bad


def scan_text(scanner, text):
    """SCANNER (functions or internal_functions) run over TEXT as if it were a .cpp file."""
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".cpp", delete=False) as f:
        f.write(text)
    try:
        return scanner(f.name)
    finally:
        os.unlink(f.name)


def self_test():
    """The scanners on made-up files: a long function found and a long table of data let pass
    (its negative control); internal functions told from members and exported ones."""
    body = "".join(f"  x += {i};\n" for i in range(80))
    table = "".join(f"    {{{i}, \"{{\"}},\n" for i in range(100))
    text = ("#define F(x) (x)\nnamespace n {\nint f(int x) {\n" + body + "  return x;\n}\n"
            "const std::vector<std::pair<int, const char*>> table = {\n" + table + "};\n"
            "struct S {\n  int g() const { return [](int y) { return y; }(1); }\n};\n}  // namespace n\n")
    found = scan_text(functions, text)
    # f: 83 lines, from its opening brace's line to its closing one (over the limit); the
    # lambda inside g is part of g, one line; the table is data, not a function.
    assert found == [(3, 85), (189, 189)], found
    # Internal: the anonymous namespace's function and the static one; not a member, not a
    # function of a named namespace, not a lambda inside a function.
    text = ("namespace n {\nnamespace {\nint helper(int x) { return [](int y) { return y; }(x); }\n"
            "struct S {\n  static int member() { return 1; }\n};\n}  // namespace\n"
            "static int counted() { return 0; }\nint exported() { return helper(1); }\n}  // namespace n\n")
    internal = scan_text(internal_functions, text)
    assert internal == {"helper", "counted"}, internal


def main():
    self_test()
    if "--lengths" in sys.argv:
        for lines, path, first in check_lengths(report_over=40):
            print(f"{lines:4d}  {path}:{first}")
        return 0
    problems = [f"{path}:{first}: a function of {lines} lines (at most {MAX_LINES})"
                for lines, path, first in check_lengths()]
    problems += check_layers()
    problems += check_unity_names()
    for p in problems:
        print(p)
    print(f"code shape: {len(problems)} problem(s)" if problems else "code shape: every function at most "
          f"{MAX_LINES} lines, every include down the floors, one name per internal function of a unity build")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
