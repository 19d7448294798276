from django.db import migrations


def create_default_account(apps, schema_editor):
    """Dev mode's account and user (used when OVSITE_ROOT_API_KEY is unset)."""
    Account = apps.get_model("ovsite", "Account")
    AccountUser = apps.get_model("ovsite", "AccountUser")
    account, _ = Account.objects.get_or_create(name="default")
    AccountUser.objects.get_or_create(account=account, user_id="default", defaults={"role": "admin"})


class Migration(migrations.Migration):
    dependencies = [("ovsite", "0001_initial")]
    operations = [migrations.RunPython(create_default_account, migrations.RunPython.noop)]
