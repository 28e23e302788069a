"""An mkdocs hook: a pipe inside a table cell's code is escaped (`"accept"\\|"revise"`), as
GitHub's Markdown requires, so that the pages read right in the repository; Python-Markdown
keeps the backslash inside code, so the built page drops it here."""


def on_page_content(html: str, **kwargs) -> str:
    return html.replace("\\|", "|")
