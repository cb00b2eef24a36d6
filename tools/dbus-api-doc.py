#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Writes the D-Bus API reference (docs/dbus-api.md) from the introspection
XML, the contract: every interface, method, property and signal, with its
signature and the gtk-doc style comment that precedes it in the XML.

  tools/dbus-api-doc.py dbus/org.vivarium.Vivarium1.xml > docs/dbus-api.md

gdbus-codegen writes DocBook and reStructuredText, not Markdown, and its
output changes with GLib's version; this is the same reading of the same
comments ("Name: text", "@arg: text", "@short_description: text"), stable
for the test that compares the file with the XML (tests/docs)."""
import re
import sys
import textwrap
from xml.dom import minidom

KINDS = [("method", "Methods"), ("property", "Properties"), ("signal", "Signals")]


def md_escape(text):
    """Plain words in Markdown: nothing the XML says turns into markup."""
    text = re.sub(r"([\\`*_\[\]<>|])", r"\\\1", text)
    return re.sub(r"^([#+-]|\d+\.)(\s)", r"\\\1\2", text)


def paragraphs(lines):
    """Lines → paragraphs, each a list of lines stripped of indentation."""
    out, cur = [], []
    for line in lines:
        # The errors and the polkit action read best as paragraphs of their own.
        if cur and re.match(r"^\s*(Errors|polkit action):", line):
            out.append(cur)
            cur = []
        if line.strip():
            cur.append(line.strip())
        elif cur:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def parse_comment(text):
    """(params {name: text}, short description, body paragraphs) of one
    element's comment, which starts with "Name:"."""
    lines = textwrap.dedent(text.strip("\n")).splitlines()
    first = re.sub(r"^\s*[\w.]+:\s*", "", lines[0]) if lines else ""
    lines = ([first] if first else []) + lines[1:]
    params, short, body = {}, "", []
    current = None
    for line in lines:
        m = re.match(r"^\s*@(\w+):\s*(.*)$", line)
        if m:
            current = m.group(1)
            if current == "short_description":
                short = m.group(2)
            else:
                params[current] = m.group(2)
            continue
        if current is not None and line.strip() and line[:1].isspace():
            if current == "short_description":
                short += " " + line.strip()
            else:
                params[current] += " " + line.strip()
            continue
        current = None
        body.append(line)
    return params, short.strip(), paragraphs(body)


def documented(parent):
    """(element, comment text or "") for each element child, the comment
    being the one right before it."""
    comment = ""
    for child in parent.childNodes:
        if child.nodeType == child.COMMENT_NODE:
            comment = child.data
        elif child.nodeType == child.ELEMENT_NODE:
            yield child, comment
            comment = ""


def signature(el, kind):
    if kind == "property":
        return f"{el.getAttribute('type')} {el.getAttribute('name')} ({el.getAttribute('access')})"
    args = []
    for a in el.getElementsByTagName("arg"):
        direction = a.getAttribute("direction") or ("out" if kind == "signal" else "in")
        prefix = "" if kind == "signal" else ("IN  " if direction == "in" else "OUT ")
        args.append(f"{prefix}{a.getAttribute('type')} {a.getAttribute('name')}")
    if not args:
        return f"{el.getAttribute('name')} ()"
    pad = " " * (len(el.getAttribute("name")) + 2)
    return f"{el.getAttribute('name')} (" + (",\n" + pad).join(args) + ")"


def member(out, el, comment, kind):
    params, _, body = parse_comment(comment)
    out.append(f"#### {el.getAttribute('name')}\n")
    out.append("```\n" + signature(el, kind) + "\n```\n")
    arg_names = [a.getAttribute("name") for a in el.getElementsByTagName("arg")]
    for name in arg_names:
        if name in params:
            out.append(f"- `{name}`: {md_escape(params[name])}")
    for name, text in params.items():
        if name not in arg_names:
            out.append(f"- `{name}`: {md_escape(text)}")
    if params:
        out.append("")
    for p in body:
        out.append(md_escape("\n".join(p)) + "\n")


def interface(out, iface, comment):
    name = iface.getAttribute("name")
    _, short, body = parse_comment(comment)
    out.append(f"## {name}\n")
    if short:
        out.append(f"*{md_escape(short)}*\n")
    for p in body:
        out.append(md_escape("\n".join(p)) + "\n")
    members = list(documented(iface))
    for kind, title in KINDS:
        of_kind = [(el, c) for el, c in members if el.tagName == kind]
        if not of_kind:
            continue
        out.append(f"### {title}\n")
        for el, c in of_kind:
            member(out, el, c, kind)


def main():
    path = sys.argv[1]
    doc = minidom.parse(path)
    head = next((n.data for n in doc.childNodes if n.nodeType == n.COMMENT_NODE), "")
    head = "\n".join(line for line in textwrap.dedent(head.strip("\n")).splitlines()
                     if not line.startswith("SPDX-License-Identifier"))
    out = ["<!-- Generated by tools/dbus-api-doc.py from dbus/org.vivarium.Vivarium1.xml;",
           "     do not edit: change the XML and run",
           "     tools/dbus-api-doc.py dbus/org.vivarium.Vivarium1.xml > docs/dbus-api.md -->\n",
           "# The D-Bus API of vivariumd\n",
           "The contract, from the introspection XML (`dbus/org.vivarium.Vivarium1.xml`,",
           "installed in the D-Bus interfaces directory). Interfaces:\n"]
    ifaces = list(documented(doc.documentElement))
    for iface, _ in ifaces:
        name = iface.getAttribute("name")
        out.append(f"- [{name}](#{name.replace('.', '').lower()})")
    out.append("\n## Overview\n")
    out.append("```\n" + head.strip("\n") + "\n```\n")
    for iface, comment in ifaces:
        interface(out, iface, comment)
    sys.stdout.write("\n".join(out).rstrip("\n") + "\n")


if __name__ == "__main__":
    main()
