#!/usr/bin/env python3
"""Check the internal links of the rendered book, offline.

    scripts/book-links.py [BOOK_DIR]      (default: target/book, what `mdbook build docs` writes)

Every `href` and `src` of every HTML page that is not an external URL (a scheme such as
`https:` or `mailto:`, or `//host`) must name a file of the rendered book, and a `#fragment`
must name an `id` (or an `<a name>`) of that page. A Markdown link to a file outside the book
stays a `.md` link after the build, so it is caught here as a missing file. Exit 1 with one
line per broken link, 2 when the book is not there.

mdbook-linkcheck 0.7.7 does not work with mdBook 0.5, and mdbook-linkcheck2 would be a second
build of mdBook's driver (with reqwest and tokio) in every cold CI run; this needs nothing but
Python's standard library.
"""

import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class Page(HTMLParser):
    """The link targets and the anchor names of one HTML page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links = []
        self.ids = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id",) + (("name",) if tag == "a" else ()):
            if attrs.get(key):
                self.ids.add(attrs[key])
        for key in ("href", "src"):
            value = attrs.get(key)
            if value is not None and tag in ("a", "img", "link", "script", "source"):
                self.links.append((self.getpos()[0], value))


def parse(path):
    page = Page()
    page.feed(path.read_text(encoding="utf-8", errors="replace"))
    return page


def is_external(target):
    parts = urlsplit(target)
    return bool(parts.scheme) or target.startswith("//")


def broken_links(book):
    pages = {}

    def page_of(path):
        if path not in pages:
            pages[path] = parse(path)
        return pages[path]

    broken = []
    for html in sorted(book.rglob("*.html")):
        for line, target in page_of(html).links:
            if is_external(target) or target == "":
                continue
            parts = urlsplit(target)
            where = f"{html.relative_to(book)}:{line}: {target}"
            if parts.path:
                dest = (html.parent / unquote(parts.path)).resolve()
                if dest.is_dir():
                    dest = dest / "index.html"
                try:
                    dest.relative_to(book)
                except ValueError:
                    broken.append(f"{where} (leaves the book)")
                    continue
                if not dest.is_file():
                    broken.append(f"{where} (no such file)")
                    continue
            else:
                dest = html
            if parts.fragment and dest.suffix == ".html":
                if unquote(parts.fragment) not in page_of(dest).ids:
                    broken.append(f"{where} (no anchor #{parts.fragment} in {dest.relative_to(book)})")
    return broken


def main():
    book = Path(sys.argv[1] if len(sys.argv) > 1 else "target/book").resolve()
    if not (book / "index.html").is_file():
        print(f"book-links: no rendered book in {book} (run: mdbook build docs)", file=sys.stderr)
        return 2
    broken = broken_links(book)
    for entry in broken:
        print(f"book-links: broken link: {entry}", file=sys.stderr)
    pages = sum(1 for _ in book.rglob("*.html"))
    print(f"book-links: {pages} pages, {len(broken)} broken internal links", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
