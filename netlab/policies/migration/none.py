"""``none``: no migration; a running job stays where it started until it ends or is preempted."""

from __future__ import annotations

from ..base import MIGRATION, MigrationPolicy


@MIGRATION.register("none")
class NoMigration(MigrationPolicy):
    """Never moves a running job (as without migration policies)."""

    name = "none"
    migrates = False

    def migrations(self, view):
        return {}
