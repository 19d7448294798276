import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("profiles", "0005_tokenizer_family_help"),
    ]

    operations = [
        migrations.AddField(
            model_name="retrievalsettings",
            name="bootstrap_working_state_peer_share",
            field=models.FloatField(
                default=0.8,
                help_text="With an actor peer (X-OpenViking-Actor-Peer), the share of the working state's places that go to that peer's events; the rest go to the user's own (events without a peer), and places one side cannot fill pass to the other. Other peers' events are left out (default 0.8: RFC §3.6, peer:user ≈ 8:2).",
                validators=[django.core.validators.MinValueValidator(0), django.core.validators.MaxValueValidator(1)],
            ),
        ),
    ]
