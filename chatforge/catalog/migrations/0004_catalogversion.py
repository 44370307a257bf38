from django.db import migrations, models


def create_the_row(apps, schema_editor):
    apps.get_model("catalog", "CatalogVersion").objects.get_or_create(pk=1)


class Migration(migrations.Migration):

    dependencies = [
        ('catalog', '0003_assistant_max_running_steps'),
    ]

    operations = [
        migrations.CreateModel(
            name='CatalogVersion',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('value', models.BigIntegerField(default=0)),
            ],
            options={
                'verbose_name': 'tool catalog version',
            },
        ),
        migrations.RunPython(create_the_row, migrations.RunPython.noop),
    ]
