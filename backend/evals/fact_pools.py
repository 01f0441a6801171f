"""The words the memory eval's facts are drawn from: whom a fact is about, and its values.

Values are chosen so that none is a word of the script's other texts; `memory_facts` still
rejects any draw that collides, so these lists may grow freely.
"""

from __future__ import annotations

RELATIONS = (
    "sister", "brother", "mother", "father", "grandmother", "grandfather", "aunt", "uncle",
    "cousin", "niece", "nephew", "son", "daughter", "partner", "godmother", "godfather",
    "mother-in-law", "father-in-law", "sister-in-law", "brother-in-law", "manager", "team lead",
    "mentor", "finance colleague", "legal colleague", "design colleague", "sales colleague",
    "support colleague", "security colleague", "research colleague", "dentist", "doctor",
    "landlord", "neighbour", "accountant", "lawyer", "best friend", "flatmate", "piano teacher",
    "yoga teacher", "tennis coach", "plumber", "electrician", "mechanic", "hairdresser", "vet",
    "babysitter", "tutor", "pharmacist", "physiotherapist", "therapist", "optician",
    "recruiter", "florist", "driving instructor", "wedding planner", "personal trainer",
    "gardener",
)  # fmt: skip

FIRST_NAMES = (
    "Priya", "Anya", "Tomasz", "Ingrid", "Kofi", "Mei", "Rafael", "Svetlana", "Dmitri", "Leila",
    "Oskar", "Amara", "Henrik", "Yusuf", "Chiara", "Matteo", "Nadia", "Bjorn", "Aiko", "Tariq",
    "Elif", "Soren", "Zanele", "Kenji", "Marisol", "Lukas", "Fatima", "Ravi", "Astrid", "Emeka",
    "Noor", "Pavel", "Carmen", "Hiroshi", "Siobhan", "Mateus", "Ines", "Kwame", "Freya", "Arjun",
    "Greta", "Jomo", "Ximena", "Niamh", "Teodor", "Yara", "Cosmin", "Dagny", "Folasade", "Imre",
    "Jelena", "Kasimir", "Liesel", "Mirela", "Nikolai", "Odile", "Quentin", "Rasmus", "Saoirse",
    "Thandiwe", "Ugo", "Vesna", "Wendell", "Xiadani", "Yannick", "Zofia", "Anselm", "Beatrix",
    "Cyprian", "Dorota", "Eero", "Fenna", "Gideon", "Halvard", "Ilse", "Jarek", "Katya",
    "Lorcan", "Malak", "Nilufar", "Orla", "Piet", "Radu", "Selma", "Tuva", "Umberto", "Viggo",
    "Wanjiru", "Yevgenia", "Zoltan",
)  # fmt: skip

SURNAMES = (
    "okafor", "lindqvist", "moreau", "tanaka", "kowalski", "haddad", "ferreira", "novak",
    "adeyemi", "sorensen", "castellano", "ivanova", "mbeki", "nakamura", "oconnell", "petrov",
    "quintero", "rasmussen", "szabo", "takahashi", "urquhart", "valdivia", "wojcik", "yilmaz",
    "zielinski", "abernathy", "bianchi", "dubois", "eriksen", "fontaine", "gallagher", "horvath",
    "ishikawa", "jansen", "kaminski", "lefebvre", "macleod", "nieminen", "ostrowski", "pellegrini",
    "rahman", "schreiber", "thorsen", "vasquez", "weissman", "achebe", "brennan", "delacroix",
)  # fmt: skip

EMAIL_DOMAINS = (
    "example.com", "example.org", "example.net", "mail.example", "post.example", "inbox.example",
)  # fmt: skip

OWN_EMAILS = ("work email", "personal email", "school email", "billing email")
OWN_PHONES = ("mobile number", "work phone number", "home phone number")

# (phrase, unit, lowest, highest): "my monthly rent is 1450 EUR"
QUANTITIES = (
    ("weight", "kg", 52, 98),
    ("height", "cm", 152, 199),
    ("daily commute", "km", 3, 48),
    ("morning run", "km", 3, 16),
    ("weekly cycling distance", "km", 40, 190),
    ("monthly rent", "EUR", 650, 2400),
    ("gym membership fee", "EUR", 19, 89),
    ("phone bill", "EUR", 12, 75),
    ("laptop budget", "EUR", 700, 3200),
    ("holiday budget", "EUR", 900, 6000),
    ("new bike's price", "EUR", 300, 2900),
    ("car insurance", "EUR", 280, 1900),
    ("suitcase weight", "kg", 12, 31),
    ("dog's weight", "kg", 4, 45),
    ("cat's weight", "kg", 3, 9),
    ("son's height", "cm", 80, 150),
    ("daughter's height", "cm", 85, 155),
    ("desk width", "cm", 90, 220),
    ("sofa length", "cm", 160, 290),
    ("bookshelf height", "cm", 100, 240),
    ("garden length", "m", 6, 60),
    ("balcony width", "cm", 110, 400),
    ("daily water goal", "ml", 1500, 3500),
    ("coffee cup size", "ml", 180, 480),
    ("nightly sleep goal", "hours", 6, 10),
    ("weekly screen time limit", "hours", 8, 30),
    ("lunch break", "min", 20, 75),
    ("meditation session", "min", 5, 45),
    ("weekly swim distance", "km", 2, 12),
    ("marathon goal time", "min", 180, 300),
    ("target weight", "kg", 50, 90),
    ("luggage allowance", "kg", 15, 40),
    ("monthly grocery budget", "EUR", 150, 900),
    ("electricity bill", "EUR", 35, 220),
    ("savings goal", "EUR", 2000, 30000),
    ("aquarium size", "l", 40, 400),
    ("kayak length", "cm", 250, 520),
    ("ski length", "cm", 140, 190),
)

# Words a unit may be written as, besides its symbol.
UNIT_WORDS = {
    "kg": ("kilograms", "kilos"),
    "cm": ("centimetres", "centimeters"),
    "km": ("kilometres", "kilometers"),
    "m": ("metres", "meters"),
    "EUR": ("euros", "€"),
    "ml": ("millilitres", "milliliters"),
    "l": ("litres", "liters"),
    "hours": ("h",),
    "min": ("minutes",),
}

APPOINTMENTS = (
    "dentist appointment", "job interview", "flight to Porto", "car service", "passport renewal",
    "wedding anniversary", "team offsite", "tax deadline", "lease renewal", "eye exam",
    "piano recital", "conference talk", "visa appointment", "moving day", "annual review",
    "blood test", "boiler inspection", "book club meeting", "vaccination", "haircut",
)  # fmt: skip

MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip

# (phrase, values): "my favourite colour is teal"
PREFERENCES = (
    ("favourite colour", ("teal", "maroon", "ochre", "lilac", "crimson", "indigo", "mauve")),
    ("favourite food", ("ramen", "paella", "lasagne", "falafel", "pierogi", "biryani")),
    ("favourite fruit", ("mango", "lychee", "papaya", "guava", "apricot", "persimmon")),
    ("favourite dessert", ("tiramisu", "baklava", "pavlova", "cheesecake", "churros", "mochi")),
    ("favourite drink", ("kombucha", "lemonade", "horchata", "lassi", "cider", "kefir")),
    ("favourite tea", ("sencha", "oolong", "rooibos", "chamomile", "darjeeling", "matcha")),
    ("favourite cheese", ("gouda", "brie", "manchego", "halloumi", "gruyere", "stilton")),
    ("favourite pizza topping", ("pepperoni", "anchovies", "artichoke", "jalapenos", "capers")),
    ("favourite spice", ("cardamom", "cumin", "saffron", "turmeric", "paprika", "sumac")),
    ("favourite soup", ("minestrone", "gazpacho", "borscht", "chowder", "laksa", "ribollita")),
    ("favourite breakfast", ("porridge", "pancakes", "shakshuka", "granola", "congee")),
    ("favourite vegetable", ("aubergine", "courgette", "kale", "asparagus", "okra", "fennel")),
    ("preferred text editor", ("Vim", "Emacs", "Helix", "Sublime Text", "Kate", "Zed")),
    ("favourite programming language", ("Rust", "Haskell", "Elixir", "Kotlin", "OCaml", "Zig")),
    ("preferred browser", ("Firefox", "Vivaldi", "Safari", "Chromium", "Librewolf")),
    ("preferred shell", ("zsh", "nushell", "tcsh", "ksh", "xonsh")),
    ("note-taking app", ("Obsidian", "Notion", "Evernote", "Logseq", "Joplin")),
    ("favourite board game", ("Catan", "Carcassonne", "Azul", "Wingspan", "Dixit")),
    ("favourite sport", ("badminton", "lacrosse", "handball", "curling", "fencing", "rowing")),
    ("favourite flower", ("tulips", "peonies", "orchids", "dahlias", "magnolias")),
    ("favourite bird", ("puffin", "kingfisher", "heron", "magpie", "wren")),
    ("favourite instrument", ("cello", "oboe", "ukulele", "harp", "banjo", "bassoon")),
    ("favourite font", ("Garamond", "Helvetica", "Futura", "Baskerville", "Gill Sans")),
    ("usual coffee order", ("flat white", "cortado", "macchiato", "americano", "affogato")),
    ("favourite snack", ("pretzels", "popcorn", "edamame", "almonds", "nachos")),
    ("favourite city", ("Kyoto", "Tallinn", "Montreal", "Valparaiso", "Ljubljana", "Hobart")),
    ("favourite dog breed", ("beagle", "dachshund", "corgi", "whippet", "samoyed", "vizsla")),
    ("favourite tree", ("birch", "cedar", "maple", "willow", "sequoia")),
    ("keyboard layout", ("Dvorak", "Colemak", "Workman", "Norman")),
    ("favourite cuisine", ("Ethiopian", "Georgian", "Peruvian", "Vietnamese", "Lebanese")),
    ("favourite pasta shape", ("orecchiette", "rigatoni", "farfalle", "fusilli", "penne")),
    ("favourite nut", ("pistachios", "cashews", "pecans", "macadamias", "hazelnuts")),
    ("code host", ("GitHub", "GitLab", "Codeberg", "Bitbucket", "Sourcehut")),
    ("diff tool", ("Meld", "Kaleidoscope", "Difftastic", "KDiff3", "vimdiff")),
    ("favourite podcast app", ("Overcast", "Pocket Casts", "AntennaPod", "Castro")),
    ("favourite museum", ("the Prado", "the Rijksmuseum", "the Uffizi", "the Hermitage")),
    ("favourite painter", ("Vermeer", "Hokusai", "Kahlo", "Klimt", "Turner")),
    ("favourite composer", ("Debussy", "Sibelius", "Dvorak", "Satie", "Rameau")),
)

FILLERS = (
    "Can you suggest a quick dinner idea?",
    "What's a good stretch for a stiff neck?",
    "How do I boil an egg properly?",
    "Any tips for sleeping better?",
    "Thanks, that's helpful.",
    "What is a mortgage offset account?",
    "Explain the difference between a virus and bacteria.",
    "Give me a fun fact about octopuses.",
    "How long should I steep green tea?",
    "What's a polite way to decline a meeting?",
    "Can you summarise the plot of Hamlet in two lines?",
    "How do I remove a coffee stain from a shirt?",
    "What should I pack for a weekend hike?",
    "Is it better to stretch before or after running?",
    "How do solar panels work, briefly?",
    "Okay, got it.",
    "What's a good name for a houseplant?",
    "Suggest a short warm-up for a video call.",
    "How do I keep basil alive indoors?",
    "What does a product manager actually do?",
    "Give me three ideas for a rainy Sunday.",
    "How can I make my emails shorter?",
    "What is the capital of Mongolia?",
    "Translate 'good morning' into Italian.",
    "How often should I water succulents?",
    "Great, thank you!",
    "What's a simple way to start journaling?",
    "Why is the sky blue?",
    "How do I fix a squeaky door hinge?",
    "Recommend a board game for two people.",
    "What's the best way to learn touch typing?",
    "Tell me a short joke.",
    "How do I politely ask for a deadline extension?",
    "What are some good questions to ask in an interview?",
    "How do I clean a cast iron pan?",
    "Makes sense.",
    "What is compound interest, in one paragraph?",
    "How do I start running as a beginner?",
    "Give me a quick breathing exercise.",
    "What's the difference between weather and climate?",
)
