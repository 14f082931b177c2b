#!/usr/bin/env python3
"""Writes crates/core/src/command_docs/data.rs: the COMMAND DOCS reference
(version, group, complexity, history, deprecation, arguments) and the
COMMAND INFO key specs of every Redis 7.0 command,
from the command table of the redis-server 7.0 sources (src/commands.c, as
the server is built with it; scripts/redis-suite.sh unpacks Debian's into
~/.cache/kvasir-redis-src).
Kvasir's table keeps its own summaries, flags and key positions; this adds
what redis-cli shows as a command's syntax (its hints and HELP).

    python3 scripts/gen-command-docs.py [SRC]
"""
import json
import re
import os
import sys

src = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.cache/kvasir-redis-src")
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
out_path = os.path.join(root, "crates/core/src/command_docs/data.rs")


def lit(s):
    return json.dumps(s, ensure_ascii=False)


def opt(s):
    return "None" if s is None else f"Some({lit(s)})"


def c_fields(text):
    """The top-level fields of one C initializer `{a,"b,c",{d,e},.f=g}`."""
    assert text.startswith("{")
    fields, depth, cur, i, in_str = [], 0, "", 1, False
    while i < len(text):
        ch = text[i]
        if in_str:
            cur += ch
            if ch == "\\":
                cur += text[i + 1]
                i += 1
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
            cur += ch
        elif ch == "{":
            depth += 1
            cur += ch
        elif ch == "}":
            if depth == 0:
                fields.append(cur)
                return fields
            depth -= 1
            cur += ch
        elif ch == "," and depth == 0:
            fields.append(cur)
            cur = ""
        else:
            cur += ch
        i += 1
    raise ValueError(text)


def c_str(field):
    field = field.strip()
    if field == "NULL":
        return None
    # Adjacent literals are one string, as in C (MIGRATE's token `""""`).
    parts = re.findall(r'"(?:[^"\\]|\\.)*"', field)
    assert parts and "".join(parts) == field, field
    return "".join(json.loads(p) for p in parts)


def named(fields, name):
    for f in fields:
        if f.strip().startswith("." + name + "="):
            return f.strip()[len(name) + 2:]
    return None


# Redis 7.0's command table as its server is built with it: commands.c
# (generated from src/commands/*.json when the release was made; the JSON
# files of the same tarball may be newer).
with open(os.path.join(src, "src/commands.c")) as f:
    code = f.read().splitlines()
arg_arrays, histories, tables = {}, {}, {}
current = None
for line in code:
    m = re.match(r"struct redisCommandArg (\w+)\[\] = \{", line)
    if m:
        current = ("args", m.group(1))
        arg_arrays[current[1]] = []
        continue
    m = re.match(r"commandHistory (\w+)\[\] = \{", line)
    if m:
        current = ("history", m.group(1))
        histories[current[1]] = []
        continue
    m = re.match(r"struct redisCommand (\w+)\[\] = \{", line)
    if m:
        current = ("table", m.group(1))
        tables[current[1]] = []
        continue
    if line.startswith("{0}") or line.startswith("};"):
        current = None
        continue
    if current and line.startswith("{"):
        fields = c_fields(line)
        {"args": arg_arrays, "history": histories, "table": tables}[current[0]][current[1]].append(fields)


def arg(fields):
    """One argument of a redisCommandArg array, as a Rust `Arg`."""
    flags = [f.strip()[len("CMD_ARG_"):] for f in fields[6].split("|")]
    flags = [f for f in ("OPTIONAL", "MULTIPLE", "MULTIPLE_TOKEN") if f in flags]
    return (
        "A { "
        f"name: {lit(c_str(fields[0]))}, "
        f"kind: {lit(fields[1].strip()[len('ARG_TYPE_'):].lower().replace('_', '-'))}, "
        f"key_spec_index: {int(fields[2])}, token: {opt(c_str(fields[3]))}, "
        f"since: {opt(c_str(fields[5]))}, "
        f"deprecated_since: {opt(c_str(named(fields, 'deprecated_since') or 'NULL'))}, "
        f"flags: {' | '.join(flags) if flags else '0'}, "
        f"args: {args_list(named(fields, 'subargs'))} }}"
    )


def args_list(array):
    """The arguments of a named redisCommandArg array (None: none)."""
    return "&[" + ", ".join(arg(a) for a in arg_arrays[array]) + "]" if array else "&[]"


KEY_FLAGS = ["RO", "RW", "OW", "RM", "ACCESS", "UPDATE", "INSERT", "DELETE", "NOT_KEY",
             "INCOMPLETE", "VARIABLE_FLAGS"]


def key_specs(field):
    """A command's key specs: `{{notes,flags,KSPEC_BS_..,.bs..,KSPEC_FK_..,.fk..},...}`."""
    if field is None or "KSPEC_" not in field:
        return []
    out = []
    for spec in c_fields(field.strip()):
        parts = c_fields(spec.strip())
        flags = [f.strip()[len("CMD_KEY_"):] for f in parts[1].split("|")]
        flags = [f for f in KEY_FLAGS if f in flags]
        bs, fk = parts[2].strip(), parts[4].strip()
        if bs == "KSPEC_BS_INDEX":
            begin = f"Begin::Index({c_fields(named(parts, 'bs.index'))[0]})"
        elif bs == "KSPEC_BS_KEYWORD":
            kw = c_fields(named(parts, "bs.keyword"))
            begin = f"Begin::Keyword({lit(c_str(kw[0]))}, {kw[1]})"
        else:
            begin = "Begin::Unknown"
        if fk == "KSPEC_FK_RANGE":
            r = c_fields(named(parts, "fk.range"))
            find = f"Find::Range({r[0]}, {r[1]}, {r[2]})"
        elif fk == "KSPEC_FK_KEYNUM":
            k = c_fields(named(parts, "fk.keynum"))
            find = f"Find::Keynum({k[0]}, {k[1]}, {k[2]})"
        else:
            find = "Find::Unknown"
        names = ", ".join(lit(f if f in ("RO", "RW", "OW", "RM") else f.lower()) for f in flags)
        out.append(f"KS {{ notes: {opt(c_str(parts[0]))}, flags: &[{names}], begin: {begin}, find: {find} }}")
    return out


docs = []


def add(table, container):
    """Every command of a redisCommand table (and its subcommands) as a
    Rust `Doc`, by full name."""
    for fields in tables[table]:
        name = c_str(fields[0])
        full = f"{container}|{name}" if container else name
        doc_flags = [f.strip()[len("CMD_DOC_"):].lower() for f in fields[4].split("|")]
        doc_flags = ", ".join(lit(f) for f in doc_flags if f != "none")
        history = ", ".join(f"({lit(c_str(v))}, {lit(c_str(t))})"
                            for v, t in histories.get(fields[8].strip(), []))
        group = fields[7].strip()[len("COMMAND_GROUP_"):].lower().replace("_", "-")
        specs = ", ".join(key_specs(fields[14] if len(fields) > 14 else None))
        docs.append((full,
            "    Doc { "
            f"name: {lit(full)}, since: {lit(c_str(fields[3]))}, group: {lit(group)}, "
            f"complexity: {opt(c_str(fields[2]))}, doc_flags: &[{doc_flags}], "
            f"deprecated_since: {opt(c_str(fields[6]))}, replaced_by: {opt(c_str(fields[5]))}, "
            f"history: &[{history}], key_specs: &[{specs}], "
            f"args: {args_list(named(fields, 'args'))} }},"))
        subs = named(fields, "subcommands")
        if subs:
            add(subs, name)


add("redisCommandTable", None)
docs.sort(key=lambda d: d[0])

lines = [
    "// Generated by scripts/gen-command-docs.py from Redis 7.0's command",
    "// table (src/commands.c of the redis-server 7.0.15 sources). Do not edit.",
    "",
    "use super::{Arg as A, Begin, Doc, Find, KeySpec as KS, MULTIPLE, MULTIPLE_TOKEN, OPTIONAL};",
    "",
    "/// Every command and subcommand (`container|name`), sorted by name.",
    "#[rustfmt::skip]",
    "pub static DOCS: &[Doc] = &[",
]
lines += [line for _, line in docs]
lines.append("];")
with open(out_path, "w") as f:
    f.write("\n".join(lines) + "\n")
print(f"{out_path}: {len(docs)} commands")
