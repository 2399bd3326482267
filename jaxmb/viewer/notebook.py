"""The HTML viewer inline in a Jupyter notebook: the same standalone document in an iframe."""

import html

from jaxmb.viewer.html import html_document


def show(what, qs, dt=1.0 / 30.0, *, height=480, **options):
    """An ``IPython.display.HTML`` that shows `jaxmb.viewer.html.html_document` of ``what`` along ``qs`` (same
    arguments and ``options``) in an iframe ``height`` pixels tall, the document inlined as its ``srcdoc``: the cell
    output carries everything, so a saved notebook replays the motion offline. Return it from a cell (or pass it to
    ``IPython.display.display``) to see it."""
    from IPython.display import HTML

    document = html.escape(html_document(what, qs, dt, **options), quote=True)
    return HTML(f'<div><iframe srcdoc="{document}" style="width: 100%; height: {int(height)}px; border: none;" '
                f'allowfullscreen></iframe></div>')  # in a div: IPython suggests IFrame for a bare iframe
