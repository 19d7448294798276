"""`manage.py doctor`: every check of `GET /ready` (the same function, ovsite/readiness.py), with the errors behind
the failed ones, then the configuration's warnings. Exits non-zero when a check fails; warnings alone do not."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from ovsite import readiness


class Command(BaseCommand):
    help = (
        "Prints every check of GET /ready (database, migrations, embedder, stored vectors, broker, workers) and "
        "the configuration's warnings; exits with 1 when a check fails."
    )
    requires_system_checks = []  # they are part of the report, and must not stop it

    def handle(self, *args, **options):
        checks = readiness.run_checks(embedder_timeout_s=settings.EMBEDDING_TIMEOUT_S)
        name_width = max(len(check.name) for check in checks)
        status_width = max(len(check.status) for check in checks)
        self.stdout.write("Checks (as GET /ready):")
        for check in checks:
            line = f"  {check.name.ljust(name_width)}  {check.status.ljust(status_width)}  {check.detail}"
            style = self.style.ERROR if check.status == readiness.FAILED else str
            self.stdout.write(style(line))
            if check.error:
                self.stdout.write(f"  {''.ljust(name_width)}  {''.ljust(status_width)}  error: {check.error}")
        warnings = readiness.configuration_warnings()
        self.stdout.write(
            f"\nConfiguration warnings ({len(warnings)}):" if warnings else "\nNo configuration warnings."
        )
        for warning in warnings:
            self.stdout.write(self.style.WARNING(f"  - {warning}"))
        failed = readiness.failed(checks)
        if failed:
            raise CommandError(f"not ready: {', '.join(check.name for check in failed)} failed")
        self.stdout.write(self.style.SUCCESS("\nReady."))
