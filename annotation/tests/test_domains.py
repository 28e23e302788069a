"""One list of domains (issue 24, section 2): the migration leaves one name per domain, every
import maps its rows to the list or refuses them with the line, the admin keeps it whole."""

import re

import pytest
from django.core.exceptions import ValidationError

from annotation.models import Domain, DomainMapping, Image
from annotation.tests.test_import import line, manifest_file, zip_of
from conftest import png_bytes

pytestmark = pytest.mark.django_db


def test_the_list_has_the_demos_names_and_the_crag_mm_table_maps_to_them():
    names = set(Domain.objects.values_list("name", flat=True))
    assert {"objects", "places", "animals", "food", "people"} <= names
    assert not names & {"everyday objects", "local places"}
    mapped = dict(DomainMapping.objects.values_list("label", "domain"))
    assert mapped["local"] == "places" and mapped["general object recognition"] == "objects"
    assert {d for d in mapped.values() if d} <= names


def test_the_manifest_maps_a_domain_to_the_list_or_refuses_the_line(client, root):
    client.force_login(root)
    refused = client.post(
        "/import/",
        {
            "manifest": manifest_file(
                line("s1", "s1.png", domain="Objects"), line("s2", "s2.png", domain="gadgets")
            ),
            "images": zip_of({"s1.png": png_bytes(), "s2.png": png_bytes()}),
        },
    )
    assert refused.status_code == 400
    problems = re.findall(r"<li>(line \d+: [^<]*)</li>", refused.content.decode())
    assert len(problems) == 1 and problems[0].startswith("line 2: domain &#x27;gadgets&#x27;")
    assert "is not one of the benchmark&#x27;s domains" in problems[0]
    assert not Image.objects.exists()
    # The same name in another case or spacing is the list's name.
    ok = client.post(
        "/import/",
        {
            "manifest": manifest_file(line("s1", "s1.png", domain="  Objects ")),
            "images": zip_of({"s1.png": png_bytes()}),
        },
    )
    assert ok.status_code == 200, ok.content.decode()[-2000:]
    assert Image.objects.get().domain == "objects"


def test_the_admin_keeps_one_name_per_domain_and_mappings_to_the_list():
    with pytest.raises(ValidationError, match="already in the list"):
        Domain(name="Objects").full_clean()
    mapping = DomainMapping(label="new label", domain="gizmos")
    with pytest.raises(ValidationError, match="not in the list of domains"):
        mapping.full_clean()
    mapping.domain = "PLACES"
    mapping.full_clean()
    assert mapping.domain == "places"


def test_the_admin_lists_the_domains(client, root):
    root.is_superuser = True
    root.save()
    client.force_login(root)
    page = client.get("/admin/annotation/domain/").content.decode()
    assert "objects" in page and "places" in page
