"""What the agent did: the host-neutral transcript, its writer and the activity it sums to.

:mod:`.models` is the ``transcript.jsonl`` format; :mod:`.normalize` the protocol
each host's normalizer implements (the normalizers live with their hosts);
:mod:`.writer` writes the transcript and raw stream as a session streams, bounded
and redacted; :mod:`.activity` counts tools, skills and subagents.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._util.lazy import export_homes, load_export

#: Every re-exported name, by the module that defines it (loaded on first use).
_EXPORTS: dict[str, tuple[str, ...]] = {
    ".activity": ("copy_trial_files", "recorded_activity"),
    ".models": (
        "TRANSCRIPT_FILE",
        "ErrorEntry",
        "HeaderEntry",
        "RawEntry",
        "ResultEntry",
        "SessionStartEntry",
        "SkillEntry",
        "SubagentEntry",
        "TextEntry",
        "ToolCallEntry",
        "ToolKind",
        "ToolStatus",
        "TranscriptEntry",
        "TranscriptError",
        "TruncatedEntry",
        "UsageEntry",
        "decode_transcript",
        "parse_entry",
        "parse_transcript",
        "read_transcript_lines",
    ),
    ".normalize": ("Normalizer",),
    ".writer": ("LOG_CHARS", "RAW_FILE", "Redactor", "TranscriptWriter", "cap_text"),
}

if TYPE_CHECKING:
    from .activity import copy_trial_files as copy_trial_files
    from .activity import recorded_activity as recorded_activity
    from .models import TRANSCRIPT_FILE as TRANSCRIPT_FILE
    from .models import ErrorEntry as ErrorEntry
    from .models import HeaderEntry as HeaderEntry
    from .models import RawEntry as RawEntry
    from .models import ResultEntry as ResultEntry
    from .models import SessionStartEntry as SessionStartEntry
    from .models import SkillEntry as SkillEntry
    from .models import SubagentEntry as SubagentEntry
    from .models import TextEntry as TextEntry
    from .models import ToolCallEntry as ToolCallEntry
    from .models import ToolKind as ToolKind
    from .models import ToolStatus as ToolStatus
    from .models import TranscriptEntry as TranscriptEntry
    from .models import TranscriptError as TranscriptError
    from .models import TruncatedEntry as TruncatedEntry
    from .models import UsageEntry as UsageEntry
    from .models import decode_transcript as decode_transcript
    from .models import parse_entry as parse_entry
    from .models import parse_transcript as parse_transcript
    from .models import read_transcript_lines as read_transcript_lines
    from .normalize import Normalizer as Normalizer
    from .writer import LOG_CHARS as LOG_CHARS
    from .writer import RAW_FILE as RAW_FILE
    from .writer import Redactor as Redactor
    from .writer import TranscriptWriter as TranscriptWriter
    from .writer import cap_text as cap_text

_HOMES = export_homes(_EXPORTS)

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    return load_export(__name__, _HOMES, name)
