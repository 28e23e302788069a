from core import access


def roles(request) -> dict:
    user_roles = access.roles(request.user)
    return {
        "roles": user_roles,
        "is_annotator": access.ANNOTATOR in user_roles,
        "is_adjudicator": access.ADJUDICATOR in user_roles,
        "is_rubric_reviser": access.RUBRIC_REVISER in user_roles,
        "is_admin": "admin" in user_roles,
    }
