#!/usr/bin/env python
import os
import sys

# Every command but the development server is maintenance (migrations, re-embedding, imports): it runs with the
# commands' statement timeout, not the web requests' (settings.py).
WEB_COMMANDS = {"runserver"}

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ovsite.settings")
    from django.core.management import execute_from_command_line

    if sys.argv[1:2] and sys.argv[1] not in WEB_COMMANDS:
        from django.conf import settings

        from core.db_session import use_statement_timeout

        use_statement_timeout(settings.DB_COMMAND_STATEMENT_TIMEOUT_MS)
    execute_from_command_line(sys.argv)
