"""The demo data's content, importable without Django (the `make run` launcher prints it)."""

DEMO_PASSWORD_SUFFIX = "-demo-pass"

# (user name, groups, staff)
DEMO_USERS = [
    ("admin", [], True),
    ("alice", ["annotator"], False),
    ("bob", ["annotator"], False),
    ("erin", ["annotator"], False),
    ("carol", ["adjudicator"], False),
    ("dave", ["rubric_reviser"], False),
]

# (file in skimage/data, source id, entity, domain, popularity, demo questions)
DEMO_IMAGES = [
    (
        "chelsea.png",
        "demo-chelsea",
        "Tabby cat",
        "animals",
        "head",
        [
            "What kind of cat is this, and what makes its coat look the way it does?",
            "Is this cat breed healthy, and what does it need to live a long life?",
            "What is this animal?",
        ],
    ),
    (
        "coffee.png",
        "demo-coffee",
        "Cappuccino",
        "food",
        "head",
        [
            "What is this drink and how is the pattern on top made?",
            "How did this drink become popular around the world, and how do cafes make it today?",
            "Is this good?",
        ],
    ),
    (
        "rocket.jpg",
        "demo-rocket",
        "Falcon 9",
        "vehicles",
        "torso",
        [
            "What rocket is this, and how does its first stage come back to land after launch?",
            "How much does a launch on this rocket cost, and why is it cheaper than older rockets?",
            "What is the DSCOVR satellite's orbit around L1 like?",
        ],
    ),
    (
        "astronaut.png",
        "demo-astronaut",
        "Eileen Collins",
        "people",
        "torso",
        [
            "Who is this astronaut, and what firsts did she achieve in the space program?",
            "What missions did this person fly, and what did each one accomplish?",
        ],
    ),
    (
        "coins.png",
        "demo-coins",
        "Greek coins from Pompeii",
        "objects",
        "tail",
        [
            "Where do coins like these come from, and what do their designs tell historians?",
            "How were these coins made, and what were they worth when they were used?",
        ],
    ),
    (
        "hubble_deep_field.jpg",
        "demo-hubble",
        "Hubble Deep Field",
        "places",
        "tail",
        [
            "What is this image of space, and how was it taken?",
            "What did astronomers learn from this picture about how galaxies formed?",
        ],
    ),
]

# Demo reviews left for the LLM stages (load_demo): an image whose first question two
# annotators accepted (for the guard), and one whose questions were all discarded (for
# generation).
DEMO_AWAITING_GUARD = "demo-rocket"
DEMO_NEEDING_CANDIDATES = "demo-hubble"
