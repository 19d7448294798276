from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('profiles', '0005_tokenizer_family_help'),
    ]

    operations = [
        migrations.AddField(
            model_name='retrievalsettings',
            name='token_counts_version',
            field=models.CharField(blank=True, default='', editable=False, help_text='The profile version (family and weights) the stored token counts were made with; any other is recounted.', max_length=64),
        ),
    ]
