"""Small shared helpers with no knowledge of projects, runs or hosts.

Paths and their display (:mod:`.paths`), JSON/JSONC documents (:mod:`.jsondoc`),
descriptor-relative tree walks and removal (:mod:`.fstree`), time-bounded pattern
matching (:mod:`.patterns`), child-process environments (:mod:`.environment`),
network endpoints (:mod:`.endpoints`), terminal text (:mod:`.terminal`), logging
set-up (:mod:`.logs`) and field documentation for schemas (:mod:`.fielddocs`).
Nothing is re-exported: import the module you need (several are deliberately kept
off the CLI's launch path).
"""

from __future__ import annotations
