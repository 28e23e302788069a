"""Verdict keys now hold everything the judge's prompt shows (question, photo, response, tier,
check) and the judge's model: existing rows get the new key, so a re-run still copies what was
judged on the same prompt, and a re-run after a re-tier, a question correction or a change of
judge model calls again. The key function is copied here as it stands, as a migration must not
follow later changes of the app's code."""

import hashlib
import json

from django.db import migrations

KEY_INPUTS = ("question", "photo", "response", "tier", "check")


def _digest(parts):
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8")
        digest.update(f"{len(data)}:".encode())
        digest.update(data)
    return digest.hexdigest()


def _model_identity(model):
    if model is None:
        return ""
    params = json.dumps(model.parameters or {}, sort_keys=True, separators=(",", ":"))
    return f"{model.provider}:{model.model}:{params}"


def rekey(apps, schema_editor):
    Verdict = apps.get_model("judging", "Verdict")
    rows = (Verdict.objects.select_related("judge__llm_model", "response__question__image",
                                           "check_row")
            .order_by("pk"))
    changed = []
    for row in rows.iterator(chunk_size=2000):
        response, check = row.response, row.check_row
        photo = (response.question.image.file.name or ""
                 if response.setting == "multimodal" else "")
        inputs = {"question": response.question.text, "photo": photo,
                  "response": response.text, "tier": check.tier, "check": check.text}
        key = _digest((row.judge.name, _model_identity(row.judge.llm_model),
                       row.template_version, *(inputs[name] for name in KEY_INPUTS)))
        if key != row.key:
            row.key = key
            changed.append(row)
        if len(changed) >= 2000:
            Verdict.objects.bulk_update(changed, ["key"])
            changed = []
    if changed:
        Verdict.objects.bulk_update(changed, ["key"])


class Migration(migrations.Migration):

    dependencies = [
        ("judging", "0002_spot_checks_scoring"),
        ("llm", "0004_item_not_before"),
        ("annotation", "0004_claim_indexes"),
        ("rubrics", "0001_initial"),
    ]

    operations = [migrations.RunPython(rekey, migrations.RunPython.noop)]
