from django.db import migrations, models

DEFAULT_DOMAINS = (
    "animals",
    "plants",
    "food",
    "vehicles",
    "places",
    "objects",
    "consumer products",
    "books",
    "style and fashion",
    "sports and games",
    "people",
)
# CRAG-MM's mapping and the demo named two domains differently; the demo's names are kept.
RENAMED = {"everyday objects": "objects", "local places": "places"}


def one_list(apps, schema_editor):
    """Rename the two CRAG-MM names to the demo's, then list every domain in use."""
    Image = apps.get_model("annotation", "Image")
    DomainMapping = apps.get_model("annotation", "DomainMapping")
    Domain = apps.get_model("annotation", "Domain")
    for old, new in RENAMED.items():
        Image.objects.filter(domain=old).update(domain=new)
        DomainMapping.objects.filter(domain=old).update(domain=new)
    names = {" ".join(n.split()) for n in DEFAULT_DOMAINS}
    names |= {" ".join(n.split()) for n in Image.objects.values_list("domain", flat=True)}
    names |= {
        " ".join(n.split())
        for n in DomainMapping.objects.exclude(domain="").values_list("domain", flat=True)
    }
    seen = set()
    for name in sorted(n for n in names if n):
        if name.lower() not in seen:
            seen.add(name.lower())
            Domain.objects.get_or_create(name=name)


def back(apps, schema_editor):
    Image = apps.get_model("annotation", "Image")
    DomainMapping = apps.get_model("annotation", "DomainMapping")
    for old, new in RENAMED.items():
        Image.objects.filter(domain=new).exclude(source_domain="").update(domain=old)
        DomainMapping.objects.filter(domain=new).update(domain=old)


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0007_training_gold_items_and_audits"),
    ]

    operations = [
        migrations.CreateModel(
            name="Domain",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=100, unique=True)),
            ],
            options={"ordering": ["name"]},
        ),
        migrations.RunPython(one_list, back),
    ]
