#!/usr/bin/env python3
"""Checks that the documentation matches the code.

    python3 scripts/check_docs.py [build/tessera]

1. src/schedule/README.md names every schedule rule: each one-step rule declared in
   src/schedule/rules.h (`ProgramStrategy NAME(...)`) and each name the strategy text parser
   accepts (`head == "NAME"` in src/schedule/strategy_parser.cpp: the derived `tile`, `tile_nd`
   and the combinators `id`, `fail`, `try`, `repeat` too).
2. src/cli/README.md names every command of the CLI, subcommands as `db list`. With the path of
   the built binary as the argument, the list is what `tessera --help` (and `tessera CMD --help`
   for commands with subcommands) prints; without it, the `add_subcommand("NAME", ...)` calls
   in src/cli/*.cpp.
3. Every relative link in README.md, docs/**/*.md and src/*/README.md (`[text](path)`,
   `![alt](path)`, `[ref]: path`) points to a file or folder that exists.

A name counts as named when it appears as a whole word inside a code span or block (`split(i,
32)`, `tessera db best`; not `prefetch.cpp`): prose that happens to use the word does not count. Exit code 0 when
everything matches, 1 with one line per problem otherwise, 2 on bad usage. Python 3 standard
library only.
"""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEDULE_README = "src/schedule/README.md"
CLI_README = "src/cli/README.md"


def read(rel):
    return (ROOT / rel).read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# What the code has


def schedule_rules():
    """Rule names from rules.h and the parser, each with where it was found."""
    found = {}
    for name in re.findall(r"^ProgramStrategy\s+(\w+)\s*\(", read("src/schedule/rules.h"), re.M):
        found.setdefault(name, "src/schedule/rules.h")
    for name in re.findall(r'head\s*==\s*"(\w+)"', read("src/schedule/strategy_parser.cpp")):
        found.setdefault(name, "src/schedule/strategy_parser.cpp")
    if not found:
        sys.exit("check_docs: found no rules in src/schedule/rules.h or strategy_parser.cpp; "
                 "has the code moved? Update scripts/check_docs.py")
    return found


def commands_from_sources():
    """Commands from the add_subcommand calls of src/cli/*.cpp: 'run', 'db list', ..."""
    top, nested, owner = [], [], {}
    for path in sorted((ROOT / "src/cli").glob("*.cpp")):
        text = path.read_text(encoding="utf-8")
        # `CLI::App* db = app.add_subcommand("db", ...)`: db is the variable of command "db".
        for var, name in re.findall(r'(\w+)\s*=\s*app\s*\.\s*add_subcommand\(\s*"([\w-]+)"', text):
            owner[var] = name
        for receiver, name in re.findall(r'(\w+)\s*(?:->|\.)\s*add_subcommand\(\s*"([\w-]+)"',
                                         text):
            if receiver == "app":
                top.append(name)
            else:
                nested.append((receiver, name))
    commands = list(top)
    for receiver, name in nested:
        if receiver not in owner:
            sys.exit(f"check_docs: cannot tell which command '{name}' belongs to "
                     f"({receiver}->add_subcommand); update scripts/check_docs.py")
        commands.append(f"{owner[receiver]} {name}")
    if not top:
        sys.exit("check_docs: found no add_subcommand calls in src/cli/*.cpp; "
                 "update scripts/check_docs.py")
    return commands


def subcommands_in_help(text):
    """The names under 'Subcommands:' in CLI11's --help output."""
    names, inside = [], False
    for line in text.splitlines():
        if line.strip() == "Subcommands:":
            inside = True
            continue
        if inside:
            m = re.match(r"^  (\S+)", line)
            if m:
                names.append(m.group(1))
            elif line.strip() and not line.startswith(" "):
                inside = False
    return names


def run_help(binary, args):
    try:
        out = subprocess.run([binary, *args, "--help"], capture_output=True, text=True,
                             timeout=60)
    except OSError as e:
        sys.exit(f"check_docs: cannot run {binary}: {e}")
    if out.returncode != 0:
        sys.exit(f"check_docs: `{binary} {' '.join(args)} --help` exited {out.returncode}: "
                 f"{out.stderr.strip()}")
    return out.stdout


def commands_from_binary(binary):
    """Commands as `binary --help` and `binary CMD --help` list them: {'db list': where}."""
    commands = {}
    top = subcommands_in_help(run_help(binary, []))
    if not top:
        sys.exit(f"check_docs: `{binary} --help` lists no subcommands")
    for name in top:
        commands[name] = f"`{binary} --help`"
        for sub in subcommands_in_help(run_help(binary, [name])):
            commands[f"{name} {sub}"] = f"`{binary} {name} --help`"
    return commands


# ---------------------------------------------------------------------------------------------
# What the documentation says

FENCE = re.compile(r"^(```|~~~)")


def without_fenced_blocks(text):
    """The text with fenced code blocks blanked out (line count kept)."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return "\n".join(out)


def code_spans(text):
    """Inline code spans outside fenced blocks, and the fenced blocks' lines themselves."""
    spans, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if fenced:
            spans.append(line)
        else:
            spans.extend(m.group(2) for m in re.finditer(r"(`+)(.+?)\1", line))
    return spans


def names_word(spans, name):
    # A command like `run` must not match `run-model`, nor `fuse` match `fuse_write_back`, nor a
    # rule its file name (`prefetch.cpp`).
    words = r"\s+".join(re.escape(w) for w in name.split())
    pattern = re.compile(r"(?<![\w.-])" + words + r"(?![\w.-])")
    return any(pattern.search(s) for s in spans)


def missing_names(readme, names):
    spans = code_spans(read(readme))
    return [n for n in names if not names_word(spans, n)]


LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)


def markdown_files():
    files = [ROOT / "README.md"]
    files += sorted((ROOT / "docs").rglob("*.md"))
    files += sorted((ROOT / "src").glob("*/README.md"))
    return [f for f in files if f.is_file()]


def broken_links():
    problems = []
    for path in markdown_files():
        text = without_fenced_blocks(path.read_text(encoding="utf-8"))
        # Inline code is not a link: `a[i](j)` in a code span must not be read as one.
        text = re.sub(r"(`+).+?\1", lambda m: " " * len(m.group(0)), text)
        for lineno, line in enumerate(text.splitlines(), 1):
            targets = [m.group(1) for m in LINK.finditer(line)]
            targets += [m.group(1) for m in REF_LINK.finditer(line)]
            for target in targets:
                if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("#"):
                    continue  # http:, mailto:, an anchor in the same page
                file_part = target.split("#", 1)[0].split("?", 1)[0]
                if not file_part:
                    continue
                resolved = (path.parent / file_part) if not file_part.startswith("/") \
                    else ROOT / file_part.lstrip("/")
                if not resolved.exists():
                    problems.append(f"{path.relative_to(ROOT)}:{lineno}: link to '{target}', "
                                    f"which does not exist")
    return problems


# ---------------------------------------------------------------------------------------------


def main(argv):
    if len(argv) > 2 or (len(argv) == 2 and argv[1] in ("-h", "--help")):
        print(__doc__.strip())
        return 0 if len(argv) == 2 else 2
    problems = []

    rules = schedule_rules()
    missing = missing_names(SCHEDULE_README, sorted(rules))
    for name in missing:
        problems.append(f"{SCHEDULE_README} does not name the schedule rule `{name}` "
                        f"(from {rules[name]}); add it, in a code span")

    from_sources = {name: "src/cli/*.cpp" for name in commands_from_sources()}
    if len(argv) == 2:
        commands = commands_from_binary(argv[1])
        if set(commands) != set(from_sources):
            print(f"check_docs: note: {argv[1]} lists {sorted(set(commands) - set(from_sources))}"
                  f" beyond src/cli/*.cpp and lacks {sorted(set(from_sources) - set(commands))};"
                  f" is the binary older than the sources?", file=sys.stderr)
    else:
        commands = from_sources
    for name in missing_names(CLI_README, list(commands)):
        problems.append(f"{CLI_README} does not name the command `{name}` (listed by "
                        f"{commands[name]}); add it, in a code span")

    problems += broken_links()

    if problems:
        for p in problems:
            print(f"check_docs: {p}", file=sys.stderr)
        print(f"check_docs: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"check_docs: ok: {len(rules)} schedule rules in {SCHEDULE_README}, {len(commands)} "
          f"commands in {CLI_README}, links of {len(markdown_files())} Markdown files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
