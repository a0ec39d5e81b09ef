"""The reader's language: every message the package writes for a student goes through ``_``.

Catalogs are gettext's (``walkthrough/locale/<lang>/LC_MESSAGES/walkthrough.po``, compiled to ``.mo``),
extracted and compiled with Babel. A notebook chooses its language once, in its set-up cell:
``wt.set_language("zh")``; the English notebooks say ``"en"``. A process the package starts (torchrun's, in
``distributed.launch``) inherits the language through the environment variable ``WALKTHROUGH_LANGUAGE``.
"""

import gettext
import os
from pathlib import Path

from wcwidth import wcwidth

LANGUAGES = ("en", "zh")
LOCALE_DIR = Path(__file__).parent / "locale"
DOMAIN = "walkthrough"
ENVIRONMENT = "WALKTHROUGH_LANGUAGE"  # the language a child process starts in

_translation: gettext.NullTranslations = gettext.NullTranslations()
_language = "en"


def set_language(language: str) -> None:
    """Choose the language of tables, labels, figures, feedback and errors: ``"en"`` or ``"zh"``."""
    global _translation, _language
    if language not in LANGUAGES:
        raise ValueError(
            _("language must be one of {languages}, got {language!r}: use set_language('en') or 'zh'").format(
                languages=LANGUAGES, language=language
            )
        )
    if language == "en":
        _translation = gettext.NullTranslations()
    else:
        _translation = gettext.translation(DOMAIN, localedir=LOCALE_DIR, languages=[language])
    _language = language


def get_language() -> str:
    """The language chosen by ``set_language`` (``"en"`` until one is chosen)."""
    return _language


def width(text: str) -> int:
    """The columns ``text`` takes in a fixed-width font: a Chinese character takes two (``wcwidth`` knows which);
    a control character takes none."""
    return sum(max(wcwidth(character), 0) for character in text)


def ljust(text: str, columns: int) -> str:
    """``text`` padded with spaces to ``columns`` (``str.ljust`` counts a Chinese character as one)."""
    return text + " " * (columns - width(text))


def rjust(text: str, columns: int) -> str:
    """``text`` right-aligned in ``columns`` (a Chinese character counted as two)."""
    return " " * (columns - width(text)) + text


def _(message: str) -> str:
    """``message`` in the chosen language (gettext's marker, so Babel finds it); an empty text stays empty
    (gettext would answer ``""`` with the catalog's header)."""
    return _translation.gettext(message) if message else message


def pgettext(context: str, message: str) -> str:
    """``message`` in the chosen language, as it reads in ``context``: the same English word may need two Chinese
    ones (a slider called "heads" is 头数, a shape's "heads" is 个头). Babel extracts it with its context."""
    return _translation.pgettext(context, message)


def N_(message: str) -> str:
    """Marks a message for extraction where it is defined; it is translated by ``_`` where it is shown."""
    return message


if os.environ.get(ENVIRONMENT) in LANGUAGES:
    set_language(os.environ[ENVIRONMENT])
