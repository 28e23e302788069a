"""API tokens move from rest_framework.authtoken (the key in plain text) to django-rest-knox
(a SHA-512 hash): each existing key becomes a knox token with the same value, so scripts keep
working, and the plain keys are deleted. authtoken's table is left empty (its app is no longer
installed)."""

from django.db import migrations


def hash_plain_tokens(apps, schema_editor):
    from knox.crypto import hash_token
    from knox.models import get_expiry
    from knox.settings import CONSTANTS, knox_settings

    connection = schema_editor.connection
    if "authtoken_token" not in connection.introspection.table_names():
        return  # a database made after the move
    table = connection.ops.quote_name("authtoken_token")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {connection.ops.quote_name('key')}, user_id FROM {table}")
        plain = cursor.fetchall()
    AuthToken = apps.get_model("knox", "AuthToken")
    expiry = get_expiry(knox_settings.TOKEN_TTL)
    AuthToken.objects.bulk_create(
        [
            AuthToken(
                digest=hash_token(key),
                token_key=key[: CONSTANTS.TOKEN_KEY_LENGTH],
                user_id=user_id,
                expiry=expiry,
            )
            for key, user_id in plain
        ]
    )
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table}")


class Migration(migrations.Migration):
    dependencies = [
        ("knox", "0009_extend_authtoken_field"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunPython(hash_plain_tokens, migrations.RunPython.noop)]
