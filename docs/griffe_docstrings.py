"""A Griffe extension: jaxsolve's docstrings, written for Python's ``help`` and Sphinx
habits, read as Markdown by mkdocstrings.

Two habits of the docstrings need a word to Markdown:

* Sphinx roles (``:func:`solve```, ``:class:`~x.Y```) become inline code: the name,
  without the role (mkdocstrings would print the role literally);
* an ``Args:`` item that documents several parameters at once and whose list of names
  wraps (``matvec, b, x0, ...,`` then ``store_history: as for cg``) is joined onto one
  line, which Griffe's Google-style parser reads as one item (it warns on the wrapped one).
"""

import re

import griffe

_ROLE = re.compile(r":(?:py:)?(?:func|class|mod|data|meth|attr|exc|obj|const):`~?([^`]+)`")
_WRAPPED_NAMES = re.compile(r"^(\s+)((?:\w+, )*\w+,)\n\s+((?:\w+, )*\w+:)", re.MULTILINE)


def markdown_docstring(text: str) -> str:
    """``text`` with Sphinx roles as inline code and wrapped parameter lists joined.

    Examples:
      >>> markdown_docstring("See :func:`describe` and :class:`~jaxsolve.sparse.Status`.")
      'See `describe` and `jaxsolve.sparse.Status`.'
      >>> markdown_docstring("Args:\\n    a, b,\\n        c: the same.")
      'Args:\\n    a, b, c: the same.'
    """
    return _WRAPPED_NAMES.sub(r"\1\2 \3", _ROLE.sub(r"`\1`", text))


class MarkdownDocstrings(griffe.Extension):
    """Rewrites each object's docstring with :func:`markdown_docstring` when it is loaded."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown_docstring(obj.docstring.value)
