"""HTML via BeautifulSoup: h1–h6 start sections; the text of block elements fills them."""

from bs4 import BeautifulSoup

from retrieval.documents.tree import Section

HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
BLOCKS = HEADINGS + ("p", "li", "pre", "blockquote", "td", "th", "dt", "dd", "figcaption")


def parse(text: str) -> list[Section]:
    soup = BeautifulSoup(text, "html.parser")
    for tag in soup(["script", "style", "noscript", "template"]):
        tag.decompose()
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    sections = [Section(title or "introduction", 0, "")]
    body = []
    for element in (soup.body or soup).find_all(BLOCKS):
        if element.find_parent(BLOCKS):
            continue  # its text is already in the enclosing block
        words = element.get_text(" ", strip=True)
        if not words:
            continue
        if element.name in HEADINGS:
            sections[-1].text = "\n\n".join(body)
            level = int(element.name[1])
            sections.append(Section(words, level, ""))
            body = ["#" * level + " " + words]
        else:
            body.append(words)
    sections[-1].text = "\n\n".join(body)
    return sections
