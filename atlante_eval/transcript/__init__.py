"""What the agent did: the host-neutral transcript, its writer and the activity it sums to.

:mod:`.models` is the ``transcript.jsonl`` format; :mod:`.normalize` the protocol
each host's normalizer implements (the normalizers live with their hosts);
:mod:`.writer` writes the transcript and raw stream as a session streams, bounded
and redacted; :mod:`.activity` counts tools, skills and subagents.
"""

from __future__ import annotations

from .activity import copy_trial_files, recorded_activity
from .models import (
    TRANSCRIPT_FILE,
    ErrorEntry,
    HeaderEntry,
    RawEntry,
    ResultEntry,
    SessionStartEntry,
    SkillEntry,
    SubagentEntry,
    TextEntry,
    ToolCallEntry,
    ToolKind,
    ToolStatus,
    TranscriptEntry,
    TranscriptError,
    TruncatedEntry,
    UsageEntry,
    decode_transcript,
    parse_entry,
    parse_transcript,
    read_transcript_lines,
)
from .normalize import Normalizer
from .writer import LOG_CHARS, RAW_FILE, Redactor, TranscriptWriter, cap_text

__all__ = [
    "LOG_CHARS",
    "RAW_FILE",
    "TRANSCRIPT_FILE",
    "ErrorEntry",
    "HeaderEntry",
    "Normalizer",
    "RawEntry",
    "Redactor",
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
    "TranscriptWriter",
    "TruncatedEntry",
    "UsageEntry",
    "cap_text",
    "copy_trial_files",
    "decode_transcript",
    "parse_entry",
    "parse_transcript",
    "read_transcript_lines",
    "recorded_activity",
]
