from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from ovsite import embedded_pg


class Command(BaseCommand):
    help = "Start, stop or report the embedded PostgreSQL server (data in EMBEDDED_PG_DATA)."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["start", "stop", "status"])

    def handle(self, *args, action, **options):
        if not settings.EMBEDDED_PG_ENABLED:
            raise CommandError("DATABASE_URL is set: the embedded PostgreSQL is not used.")
        pgdata = Path(settings.EMBEDDED_PG_DATA)
        if action == "start":
            socket_dir = embedded_pg.start(pgdata, settings.DATABASES["default"]["NAME"])
            self.stdout.write(f"embedded PostgreSQL running: data {pgdata}, socket {socket_dir}")
        elif action == "stop":
            stopped = embedded_pg.stop(pgdata)
            self.stdout.write("stopped" if stopped else "not running")
        else:
            self.stdout.write("running" if embedded_pg.is_running(pgdata) else "not running")
