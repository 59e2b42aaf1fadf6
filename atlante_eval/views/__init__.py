"""What a person reads: the terminal progress and summaries, ``show``, and the HTML pages.

:mod:`.progress`, :mod:`.causes`, :mod:`.show` / :mod:`.show_render`,
:mod:`.compare_render` and :mod:`.adaptive_render` render for the terminal;
:mod:`.html` renders self-contained pages; :mod:`.trial` is the one model of a
trial that ``show`` prints and the run page lays out; :mod:`.junit` writes JUnit XML;
:mod:`.formats` is the registry of file formats. Nothing is re-exported, so
importing one view never loads another (HTML and its templates stay off the
launch path).
"""

from __future__ import annotations
