"""fix_source_ids: rows imported before source ids were checked get safe ones, once."""

import pytest
from django.core.management import call_command
from django.test import Client

from annotation.models import AuditEvent, Image

pytestmark = pytest.mark.django_db


@pytest.fixture
def unsafe_images(make_image):
    """Images whose source ids the imports refuse today, and one safe image in the way."""
    make_image("a-b")
    ids = {}
    for index, source_id in enumerate(["a/b", "caf\u00e9 au lait", "..", "ok:1"]):
        image, _ = make_image(f"tmp-{index}")
        Image.objects.filter(pk=image.pk).update(source_id=source_id)
        ids[source_id] = image.pk
    return ids


def run(capsys, *args) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        call_command("fix_source_ids", *args)
        raise SystemExit(0)
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


def test_dry_run_lists_them_and_changes_nothing(capsys, unsafe_images):
    code, out, _ = run(capsys, "--dry-run")
    assert code == 0
    pk = unsafe_images["a/b"]
    assert f"'a/b' -> 'a-b-{pk}'" in out  # 'a-b' is taken
    assert "'café au lait' -> 'cafe-au-lait'" in out
    assert f"'..' -> 'image-{unsafe_images['..']}'" in out
    assert "ok:1" not in out
    assert "3 unsafe source id(s): 3 would be fixed, 0 could not be" in out
    assert Image.objects.filter(source_id="a/b").exists()
    assert not AuditEvent.objects.filter(action="images.source_id_fixed").exists()


def test_fixes_them_once_with_an_audit_event_and_their_pages_open(capsys, root, unsafe_images):
    client = Client(raise_request_exception=False)
    client.force_login(root)
    code, out, _ = run(capsys)
    assert code == 0 and "3 unsafe source id(s): 3 fixed, 0 could not be" in out
    pk = unsafe_images["a/b"]
    image = Image.objects.get(pk=pk)
    assert image.source_id == f"a-b-{pk}"
    assert Image.objects.get(pk=unsafe_images["caf\u00e9 au lait"]).source_id == "cafe-au-lait"
    event = AuditEvent.objects.get(action="images.source_id_fixed", image=image)
    assert event.data == {"from": "a/b", "to": f"a-b-{pk}"}
    assert client.get(f"/images/a-b-{pk}/").status_code == 200
    assert client.get(f"/images/a-b-{pk}/photo").status_code == 200
    # Idempotent: nothing is left to fix.
    code, out, _ = run(capsys)
    assert code == 0 and "0 unsafe source id(s): 0 fixed, 0 could not be" in out
    assert AuditEvent.objects.filter(action="images.source_id_fixed").count() == 3


def test_a_chosen_id_that_is_unsafe_or_taken_is_refused_with_the_reason(capsys, unsafe_images):
    code, out, err = run(capsys, "--rename", "a/b", "a b", "--rename", "..", "a-b")
    assert code == 1
    assert "'a/b' (image" in err and "cannot fix: the id given is not safe either" in err
    assert "'..' (image" in err and "cannot fix: 'a-b' is another image's source id" in err
    assert "3 unsafe source id(s): 1 fixed, 2 could not be" in out
    assert set(Image.objects.values_list("source_id", flat=True)) == {
        "a-b",
        "a/b",
        "..",
        "cafe-au-lait",
        "ok:1",
    }
    code, out, _ = run(capsys, "--rename", "a/b", "photo-ab", "--rename", "..", "dots")
    assert code == 0 and Image.objects.filter(source_id__in=["photo-ab", "dots"]).count() == 2


def test_a_rename_of_an_id_no_image_has_is_an_error(capsys, unsafe_images):
    with pytest.raises(Exception, match="no image has that source id"):
        call_command("fix_source_ids", "--rename", "nope", "x")
