#!/usr/bin/env python3
"""Writes crates/core/src/command_docs/data.rs: the COMMAND DOCS reference
(complexity, history, deprecation, arguments) of every Redis 7.0 command,
from the command table of the redis-server 7.0 sources (src/commands.c, as
the server is built with it; scripts/redis-suite.sh unpacks Debian's into
~/.cache/kvasir-redis-src).
Kvasir's table keeps its own summaries, groups and flags; this adds what
redis-cli shows as a command's syntax (its hints and HELP).

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


def args_expr(args):
    parts = []
    for a in args:
        flags = []
        if a.get("optional"):
            flags.append("OPTIONAL")
        if a.get("multiple"):
            flags.append("MULTIPLE")
        if a.get("multiple_token"):
            flags.append("MULTIPLE_TOKEN")
        parts.append(
            "A { "
            f"name: {lit(a['name'])}, kind: {lit(a['type'])}, "
            f"key_spec_index: {a.get('key_spec_index', -1)}, token: {opt(a.get('token'))}, "
            f"since: {opt(a.get('since'))}, deprecated_since: {opt(a.get('deprecated_since'))}, "
            f"flags: {' | '.join(flags) if flags else '0'}, "
            f"args: {args_expr(a.get('arguments', []))} }}"
        )
    return "&[" + ", ".join(parts) + "]"


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
    flags = fields[6].strip()
    sub = named(fields, "subargs")
    out = {
        "name": c_str(fields[0]),
        "type": fields[1].strip()[len("ARG_TYPE_"):].lower().replace("_", "-"),
        "token": c_str(fields[3]),
        "since": c_str(fields[5]),
        "deprecated_since": c_str(named(fields, "deprecated_since") or "NULL"),
        "optional": "CMD_ARG_OPTIONAL" in flags,
        "multiple": "CMD_ARG_MULTIPLE" in flags.replace("CMD_ARG_MULTIPLE_TOKEN", ""),
        "multiple_token": "CMD_ARG_MULTIPLE_TOKEN" in flags,
        "arguments": [arg(a) for a in arg_arrays[sub]] if sub else [],
    }
    index = int(fields[2])
    if index >= 0:
        out["key_spec_index"] = index
    return out


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
    for fields in tables[table]:
        name = c_str(fields[0])
        full = f"{container}|{name}" if container else name
        doc_flags = [f[len("CMD_DOC_"):].lower() for f in fields[4].split("|") if f.strip() != "CMD_DOC_NONE"]
        history = histories.get(fields[8].strip(), [])
        args = named(fields, "args")
        docs.append((full, {
            "since": c_str(fields[3]),
            "group": fields[7].strip()[len("COMMAND_GROUP_"):].lower().replace("_", "-"),
            "complexity": c_str(fields[2]),
            "doc_flags": [f.strip().upper() for f in doc_flags],
            "replaced_by": c_str(fields[5]),
            "deprecated_since": c_str(fields[6]),
            "history": [(c_str(h[0]), c_str(h[1])) for h in history],
            "arguments": [arg(a) for a in arg_arrays[args]] if args else [],
            "key_specs": key_specs(fields[14] if len(fields) > 14 else None),
        }))
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
for full, c in docs:
    history = ", ".join(f"({lit(v)}, {lit(t)})" for v, t in c.get("history", []))
    lines.append(
        "    Doc { "
        f"name: {lit(full)}, since: {lit(c['since'])}, group: {lit(c['group'])}, "
        f"complexity: {opt(c.get('complexity'))}, "
        f"doc_flags: &[{', '.join(lit(f.lower()) for f in c['doc_flags'])}], "
        f"deprecated_since: {opt(c.get('deprecated_since'))}, replaced_by: {opt(c.get('replaced_by'))}, "
        f"history: &[{history}], "
        f"key_specs: &[{', '.join(c['key_specs'])}], "
        f"args: {args_expr(c.get('arguments', []))} }},"
    )
lines.append("];")
with open(out_path, "w") as f:
    f.write("\n".join(lines) + "\n")
print(f"{out_path}: {len(docs)} commands")
