from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from core.auth import Caller
from core.models import DEFAULT_ACCOUNT, DEFAULT_USER, Account
from retrieval.importing import import_directory, local_files


class Command(BaseCommand):
    help = "Imports a local folder of text files and PDFs as resources, e.g. --to viking://resources/handbook."

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--to", required=True, help="target URI, e.g. viking://resources/NAME")
        parser.add_argument("--account", default=DEFAULT_ACCOUNT)
        parser.add_argument("--user", default=DEFAULT_USER, help="the user that viking://~ means")

    def handle(self, *args, path, to, account, user, **options):
        root = Path(path)
        if not root.is_dir():
            raise CommandError(f"{root} is not a directory")
        record = Account.objects.filter(name=account).first()
        if record is None:
            raise CommandError(f"account {account!r} does not exist")
        caller = Caller(record.id, record.name, user, "admin")
        with tqdm(total=len(local_files(root)), unit="file", desc="import") as bar:
            result = import_directory(caller=caller, root=root, to=to, progress=bar.update)
        self.stdout.write(f"imported {result['written']} files under {result['root_uri']}")
        for item in result["skipped"]:
            self.stdout.write(f"skipped {item['path']}: {item['reason']}")
