"""The page's Markdown renderer (frontend/markdown.js), run in the browser on model-like text."""

from __future__ import annotations

import pytest
from playwright.async_api import Page

from tests.browser.harness import Tally

# The shared browser lives in the session's event loop (see harness.py).
pytestmark = pytest.mark.asyncio(loop_scope="session")

RENDER = """async (source) => {
    const { renderMarkdown } = await import("/markdown.js");
    const box = document.createElement("div");
    box.append(renderMarkdown(source));
    box.querySelectorAll(".code-head").forEach((head) => head.remove());
    return box.innerHTML;
}"""

CASES = [
    (
        "**bold** and *it* and `x < y`",
        "<p><strong>bold</strong> and <em>it</em> and <code>x &lt; y</code></p>",
    ),
    ("snake_case_name stays", "<p>snake_case_name stays</p>"),
    ("# Title", '<h2 class="md-h">Title</h2>'),
    ("line one\nline two", "<p>line one<br>line two</p>"),
    ("<b>raw</b> &amp;", "<p>&lt;b&gt;raw&lt;/b&gt; &amp;amp;</p>"),
    (
        "[site](https://example.com/a?b=1) [bad](javascript:alert(1))",
        '<p><a href="https://example.com/a?b=1" target="_blank" '
        'rel="noopener noreferrer nofollow ugc">site</a> '
        '<span class="md-unsafe-link">bad</span></p>',
    ),
    (
        "- a\n- b\n  - c\n1. one",
        "<ul><li>a</li><li>b<ul><li>c</li></ul></li></ul><ol><li>one</li></ol>",
    ),
    ("> quoted *text*", "<blockquote><p>quoted <em>text</em></p></blockquote>"),
    (
        "| a | b |\n|---|--:|\n| 1 | 2 |",
        '<div class="table-wrap"><table><thead><tr><th>a</th><th class="align-right">b</th>'
        '</tr></thead><tbody><tr><td>1</td><td class="align-right">2</td></tr></tbody>'
        "</table></div>",
    ),
    (
        "```js\nif (a < b) {}\n```",
        '<div class="code-block"><pre><code data-language="js">if (a &lt; b) {}</code></pre></div>',
    ),
    (  # a reply still streaming: the open fence runs to the end
        "```\nunfinished <code>",
        '<div class="code-block"><pre><code>unfinished &lt;code&gt;</code></pre></div>',
    ),
]


async def render(page: Page, source: str) -> str:
    return str(await page.evaluate(RENDER, source))


async def test_markdown_renders_common_syntax_and_keeps_html_as_text(tally: Tally) -> None:
    page = await tally.open_page()
    for source, expected in CASES:
        assert await render(page, source) == expected, source
    await tally.screenshot(page, "markdown")
