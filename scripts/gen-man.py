#!/usr/bin/env python3
"""Writes a man page from a command's own --help (run at build time), so that the page
cannot drift from the program: NAME and SYNOPSIS from its first lines, each "Heading:"
section as a section of the page, each option or command line as a tagged paragraph,
the --help of each subcommand (gjob show, gctl set-gpus, ...) as a section of its own,
then the hand-written man/CMD.extra (roff: ENVIRONMENT, FILES, EXAMPLES, SEE ALSO).

  gen-man.py --exe build/gbatch --section 1 --version V [--extra man/gbatch.extra] OUT
  gen-man.py --toml --exe build/gflowd --version V [--extra man/gflow.toml.extra] OUT
    (gflow.toml(5) from the file 'gflowd init' writes: every key, its default and what
    it does)
"""
import argparse
import os
import re
import subprocess
import tempfile

HEADING = re.compile(r"^([A-Z][A-Za-z0-9 ,'()/_-]*):$")
ITEM = re.compile(r"^( {1,8})(\S.*?)(?:\s{2,}(\S.*))?$")


def esc(text):
    """Plain text as roff: backslashes, minus signs, and a leading control character."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    text = "".join(c if ord(c) < 128 else "\\[u%04X]" % ord(c) for c in text)
    return "\\&" + text if text.startswith((".", "'")) else text


def bold_flags(tag):
    """An option's tag with its flags in bold: "-p, --priority N"."""
    return re.sub(r"(?<![\w-])(--?[A-Za-z0-9][\w-]*)",
                  lambda m: "\\fB" + m.group(1) + "\\fR", esc(tag).replace("\\-", "-")) \
        .replace("-", "\\-")


def run_help(argv):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GFLOW_", "XDG_"))}
    env["GFLOW_SOCKET"] = "/nonexistent/gflowd.sock"
    cp = subprocess.run(argv + ["--help"], capture_output=True, text=True, env=env, timeout=30)
    return cp.stdout if cp.returncode == 0 else None


def blocks(text):
    """(heading or None, [lines]) for each part of a --help text."""
    out, head, lines = [], None, []
    for line in text.rstrip("\n").split("\n"):
        m = HEADING.match(line)
        if m:
            out.append((head, lines))
            head, lines = m.group(1), []
        elif line.startswith("Usage: "):
            out.append((head, lines))
            out.append(("Usage", [line[len("Usage: "):]]))
            head, lines = None, []
        else:
            lines.append(line)
    out.append((head, lines))
    return [(h, l) for h, l in out if h or any(x.strip() for x in l)]


def render_lines(lines):
    """Paragraphs at column 0 as text; indented lines as tagged paragraphs (the tag, then
    its description and the lines indented as far as the description, which continue
    it; a line indented less is the next tag)."""
    roff, item_col, desc_col = [], None, None
    for line in lines:
        if not line.strip():
            roff.append(".PP")
            item_col = None
            continue
        m = ITEM.match(line)
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            roff.append(esc(line.strip()))
            item_col = None
        elif item_col is not None and indent > item_col and \
                (desc_col is None or indent >= desc_col):
            desc_col = desc_col or indent
            roff.append(esc(line.strip()))
        elif m:
            item_col = len(m.group(1))
            desc_col = line.index(m.group(3), len(m.group(1)) + len(m.group(2))) \
                if m.group(3) else None
            roff += [".TP", bold_flags(m.group(2))]
            if m.group(3):
                roff.append(esc(m.group(3)))
        else:
            roff.append(esc(line.strip()))
    # No empty paragraphs: groff -ww would not mind, but they add blank lines.
    tidy = []
    for r in roff:
        if r == ".PP" and (not tidy or tidy[-1] in (".PP", ".TP")):
            continue
        tidy.append(r)
    while tidy and tidy[-1] == ".PP":
        tidy.pop()
    return tidy


def page_from_help(name, text, subs):
    first = text.split("\n", 1)[0]
    m = re.match(r"^(\S+) - (.*)$", first)
    if m:
        summary, text = m.group(2), text.split("\n", 1)[1]
    else:  # "Usage: ..." first: the summary is the first line of the paragraph after it
        paras = [p for p in text.split("\n\n") if p.strip() and not p.startswith("Usage")]
        summary = paras[0].strip().split("\n")[0].rstrip(".")
        summary = summary[0].lower() + summary[1:]
    roff = [".SH NAME", f"{name} \\- {esc(summary)}"]
    described = False
    for head, lines in blocks(text):
        if head == "Usage":
            roff += [".SH SYNOPSIS", ".nf"] + [esc(l.strip()) for l in lines if l.strip()] \
                + [".fi"]
            continue
        if head is None and lines and lines[0].startswith("  ") and roff[-1] == ".fi":
            roff[-1:-1] = [esc(l.strip()) for l in lines if l.strip()]  # more usage lines
            continue
        if head is None or head in ("Job ids", "States", "Exit status"):
            if not described:
                roff.append(".SH DESCRIPTION")
                described = True
            elif head is None:
                roff.append(".PP")
            if head:
                roff.append(f".SS {esc(head)}")
            roff += render_lines(lines)
            continue
        roff.append(f".SH {esc(head.upper())}")
        roff += render_lines(lines)
    for sub, sub_text in subs:
        roff.append(f".SH {esc(name.upper())} {esc(sub.upper())}")
        for head, lines in blocks(sub_text):
            if head == "Usage":
                roff += [".nf"] + [esc(l.strip()) for l in lines if l.strip()] + [".fi"]
            else:
                if head:
                    roff.append(f".SS {esc(head)}")
                roff += render_lines(lines)
    return roff


def subcommands(exe, text):
    """The --help of each subcommand the Commands: section names, where it has its own."""
    out, inside = [], False
    for line in text.split("\n"):
        if line == "Commands:":
            inside = True
        elif inside and not line.strip():
            inside = False
        elif inside and re.match(r"^  [a-z]", line):
            word = re.split(r"[\s,]", line.strip())[0]
            if word in [w for w, _ in out]:
                continue
            sub = run_help([exe, word])
            if sub and sub != text:
                out.append((word, sub))
    return out


def page_from_toml(exe):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "gflow.toml")
        subprocess.run([exe, "init", "-c", path], check=True, capture_output=True, timeout=30)
        text = open(path).read()
    intro, rest = text.split("\n\n", 1)
    roff = [".SH NAME", "gflow.toml \\- configuration file of the gflow daemon",
            ".SH SYNOPSIS", ".nf", "~/.config/gflow/gflow.toml (per\\-user daemon)",
            "/etc/gflow/gflow.toml (system daemon)", ".fi", ".SH DESCRIPTION",
            "A TOML file read by", ".BR gflowd (1)", "at start and at",
            ".BR \"gflowd reload\" .",
            "What follows is the file", ".B gflowd init",
            "writes, key by key, with each key's default.", ".PP"]
    roff += [esc(l.lstrip("# ")) for l in intro.split("\n")]
    roff.append(".SH KEYS")
    comment = []
    for line in rest.split("\n"):
        if line.startswith("[") and line.endswith("]"):
            roff.append(f".SS {esc(line)}")
            comment = []
        elif re.match(r"^# [a-z_]+ =", line):
            key = line[2:]
            roff += [".TP", "\\fB" + esc(key.split(" =")[0]) + "\\fR =" +
                     esc(key.split(" =", 1)[1])]
            desc = " ".join(comment)
            m = re.match(r"^(.*?)\s{2,}(-.*)$", desc)
            if m:
                desc = f"{m.group(1)} (flag: {m.group(2)})"
            roff.append(esc(desc) if desc else "(no description)")
            comment = []
        elif line.startswith("# "):
            comment.append(line[2:])
        elif not line.strip() and comment:
            roff += [".PP"] + [esc(c) for c in comment]
            comment = []
    return roff


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exe", required=True)
    ap.add_argument("--section", default="1")
    ap.add_argument("--version", default="")
    ap.add_argument("--extra")
    ap.add_argument("--toml", action="store_true")
    ap.add_argument("out")
    a = ap.parse_args()
    name = "gflow.toml" if a.toml else os.path.basename(a.exe)
    section = "5" if a.toml else a.section
    if a.toml:
        body = page_from_toml(a.exe)
    else:
        text = run_help([a.exe])
        if text is None:
            raise SystemExit(f"gen-man: {a.exe} --help failed")
        body = page_from_help(name, text, subcommands(a.exe, text))
    head = [f'.\\" Generated by scripts/gen-man.py from {name} --help; do not edit.',
            f'.TH {name.upper()} {section} "" "gflow {a.version}" "gflow manual"']
    extra = open(a.extra).read().rstrip("\n").split("\n") if a.extra else []
    with open(a.out, "w") as f:
        f.write("\n".join(head + body + extra) + "\n")


if __name__ == "__main__":
    main()
