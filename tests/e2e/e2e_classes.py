"""Checks that an e2e file split into several ctests (CLASSES in
tests/e2e/CMakeLists.txt) runs every test it defines, so that a class or a
test added to the file later cannot silently drop out of the suite.

usage: e2e_classes.py FILE.py ENTRY...
  An ENTRY is what one ctest runs: CLASS, or CLASS.test_method, or several
  of them joined by commas, where a bare test_method is one of the class
  before it (DaemonTest.test_a,test_b). A class split by methods must list
  all of them.

Reads the file's syntax only (nothing is imported, nothing runs): a test class
is one that defines a test_* method or inherits one from a class of the file.
"""

import ast
import sys


def test_methods(source):
    """{class name: its test_* method names, own and inherited from classes of
    the same file} for the classes of `source` that have any."""
    classes = {node.name: node for node in ast.parse(source).body
               if isinstance(node, ast.ClassDef)}

    def methods(name, seen=()):
        node = classes.get(name)
        if node is None or name in seen:
            return set()
        found = {item.name for item in node.body
                 if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and item.name.startswith("test")}
        for base in node.bases:
            if isinstance(base, ast.Name):
                found |= methods(base.id, seen + (name,))
        return found

    return {name: found for name in classes if (found := methods(name))}


def test_classes(source):
    return set(test_methods(source))


def parts(entry):
    """The classes and Class.test_methods an entry names, each in full."""
    names, cls = [], None
    for part in entry.split(","):
        if part.startswith("test") and cls:
            part = f"{cls}.{part}"
        cls = part.partition(".")[0]
        names.append(part)
    return names


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    path, entries = argv[1], argv[2:]
    with open(path, encoding="utf-8") as f:
        defined = test_methods(f.read())
    listed = [name for entry in entries for name in parts(entry)]
    problems = []
    for name in sorted(set(listed)):
        cls, _, method = name.partition(".")
        if cls not in defined or (method and method not in defined[cls]):
            problems.append(f"{name} is not a test class or method of the file")
        if listed.count(name) > 1 or (method and cls in listed):
            problems.append(f"{name} runs twice")
    for cls, methods in sorted(defined.items()):
        if cls in listed:
            continue
        missing = sorted(m for m in methods if f"{cls}.{m}" not in listed)
        if missing:
            problems.append(f"no ctest runs {cls}: " + ", ".join(missing))
    for problem in problems:
        print(f"{path}: {problem} (see CLASSES in tests/e2e/CMakeLists.txt)", file=sys.stderr)
    if problems:
        return 1
    print(f"{path}: {len(defined)} test classes in {len(entries)} ctests")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
