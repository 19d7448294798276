from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand

CREATE_COMMAND = ".venv/bin/python manage.py createsuperuser"


class Command(BaseCommand):
    help = (
        "Says how to log in to the admin console (`make run` calls it). With DJANGO_SUPERUSER_USERNAME and "
        "DJANGO_SUPERUSER_PASSWORD set it creates that superuser first, once: an existing one is left as it is."
    )

    def add_arguments(self, parser):
        parser.add_argument("--admin-url", default="http://127.0.0.1:8000/admin/")

    def handle(self, *args, admin_url, **options):
        username = settings.DJANGO_SUPERUSER_USERNAME
        if username and settings.DJANGO_SUPERUSER_PASSWORD_SET:
            users = get_user_model()._default_manager
            if users.filter(**{get_user_model().USERNAME_FIELD: username}).exists():
                outcome = "exists; its password is left as it is"
            else:
                # Django's own non-interactive path: it validates the name and reads DJANGO_SUPERUSER_PASSWORD.
                call_command(
                    "createsuperuser",
                    interactive=False,
                    username=username,
                    email=settings.DJANGO_SUPERUSER_EMAIL,
                    verbosity=0,
                )
                outcome = "created from DJANGO_SUPERUSER_USERNAME and DJANGO_SUPERUSER_PASSWORD"
            self.stdout.write(f"Admin console: {admin_url} — log in as {username!r} (superuser {outcome}).")
            return
        if username:
            self.stderr.write(
                "DJANGO_SUPERUSER_USERNAME is set but DJANGO_SUPERUSER_PASSWORD is not: no superuser was created."
            )
        self.stdout.write(
            f"Admin console: {admin_url} — to create a login, run once:\n  {CREATE_COMMAND}\n"
            "(or set DJANGO_SUPERUSER_USERNAME, DJANGO_SUPERUSER_PASSWORD and DJANGO_SUPERUSER_EMAIL "
            "before `make run`, which then creates that superuser)."
        )
