"""A demo meta-rubric (demo data, written for the demo, not produced by an LLM) for the demo
cappuccino photo, so that the rubric workspace has something to show after `make run`."""

DEMO_SOURCE_ID = "demo-coffee"
DEMO_QUESTION = "What is this drink and how is the pattern on top made?"

DEMO_META_RUBRIC = {
    "schema_version": 1,
    "question": DEMO_QUESTION,
    "entity": "Cappuccino",
    "snippets": [
        {
            "id": "s1",
            "url": "https://en.wikipedia.org/wiki/Cappuccino",
            "title": "Cappuccino",
            "text": "A cappuccino is an espresso-based coffee drink prepared with steamed milk "
            "foam (demo snippet).",
        },
        {
            "id": "s2",
            "url": "https://en.wikipedia.org/wiki/Latte_art",
            "title": "Latte art",
            "text": "Latte art is made by pouring microfoam into a shot of espresso (demo "
            "snippet).",
        },
    ],
    "items": [
        {
            "id": "I1",
            "type": "fact",
            "tier": "answer_critical",
            "snippets": ["s1"],
            "statement": "The drink is a cappuccino, an espresso drink topped with milk foam",
        },
        {
            "id": "I2",
            "type": "strict_list",
            "tier": "answer_critical",
            "snippets": ["s1"],
            "topic": "components of a cappuccino",
            "items": ["espresso", "steamed milk", "milk foam"],
        },
        {
            "id": "I3",
            "type": "flexible_list",
            "tier": "valuable",
            "snippets": ["s2"],
            "topic": "common latte art patterns",
            "options": ["heart", "rosetta", "tulip", "swan", "fern"],
            "baseline": [1],
            "meta_insights": [
                {
                    "id": "M1",
                    "tier": "context",
                    "statement": "Free-poured patterns all come from the pitcher's "
                    "motion, not from tools",
                }
            ],
        },
        {
            "id": "I4",
            "type": "process",
            "tier": "answer_critical",
            "snippets": ["s2"],
            "topic": "making the pattern on top",
            "steps": [
                {"text": "Pull a shot of espresso", "required": True},
                {"text": "Steam the milk into a fine microfoam", "required": True},
                {"text": "Pour from a height so the milk sinks under the crema", "required": True},
                {"text": "Lower the pitcher and wiggle it to draw the pattern", "required": True},
                {"text": "Finish by drawing through the pattern", "required": False},
            ],
        },
        {
            "id": "I5",
            "type": "relationship",
            "tier": "context",
            "entity": "Caffè latte",
            "relation": "a similar espresso and milk drink",
            "aspects": ["a latte has more steamed milk", "a cappuccino has a thicker foam layer"],
        },
    ],
}
