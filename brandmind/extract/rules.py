"""The offline, rule-based fact extractor (the embedded default).

Regular expressions over each sentence of a turn, for the common patterns of
personal memory, in the first person (the turn's speaker is the subject of "I",
"my", "we"; the ``user`` when the turn has no speaker) and the third person (a
capitalised name as subject: "Ann lives in Lisbon"):

============================  ===============================================
pattern                       facts
============================  ===============================================
name                          "my name is X", "call me X", "I go by X", "I'm X",
                              "everyone calls me X" -> name
birthdays                     "my birthday is June 3", "Ann's birthday's on the
                              3rd of June", "I was born on June 3, 1990" ->
                              birthday (+ born_on with a year); "I was born in
                              1990" -> birth_year
diet                          "I'm vegetarian", "I'm a vegan", "I went
                              pescatarian last year", "I follow a keto diet"
                              -> diet (negated: "I'm no longer vegan")
where someone lives / is from "I live in X", "I'm based in X" -> lives_in;
                              "I moved to X" -> moved_to + lives_in;
                              "I moved from X (to Y)" -> moved_from X and
                              lives_in X negated (+ moved_to Y, lives_in Y);
                              "I'm from X" -> from; "I was born in X" -> born_in
work and study                "I work at/for X" -> works_at; "I work as a X",
                              "I'm a nurse" -> works_as; "I got a job at X";
                              "I quit my job at X" (negated works_at);
                              "I study X" -> studies; "I'm a student at X"
likes and dislikes            "I love/like/enjoy/adore/am into X" -> likes;
                              "I hate/dislike/can't stand X", "I don't like X"
                              -> dislikes; "my favorite F is X" -> likes
plans and decisions           "I'm planning to/going to V", "I will V <date>",
                              "I'm moving to X" -> plans; "I decided to V",
                              "we chose X" -> decided (type decision)
relationships                 "my wife Sara", "Sara is my wife", "my sister's
                              name is Maria", "Ann's brother Tom" ->
                              is_married_to / partner_of / sibling_of /
                              child_of / parent_of / friend_of / ...
possessions                   "I have/own a dog", "my dog Max", "I adopted a
                              cat last week" -> has
events with dates             "I went to/attended/visited X <date>" ->
                              attended / visited; "I went hiking yesterday"
                              -> did; "I started V", "I joined X" -> started /
                              joined; valid_from = the date, resolved against
                              the turn's time (dates.py)
============================  ===============================================

Negations ("I no longer live in X", "I don't like X anymore", "I used to work
at X", "I sold my car") give the positive predicate with ``negated=True``; a
plain "I don't like X" is ``dislikes X``.

Precision over recall: questions, hypotheticals (if, would, could, maybe,
wish, want to, hope...), reported speech (said, told, thinks...) and quoted
text yield nothing; objects must look like what the predicate takes (places
and organisations are capitalised, jobs come from a lexicon, possessions from
a list of things people own); pronoun objects ("I love it") are dropped.
"""
from __future__ import annotations

import re
from typing import Any, Callable

from .base import Fact, Turn, attributable, empty_report, person_turns
from .dates import MONTHS, DateSpan, find_dates

__all__ = ["RulesExtractor"]

# -- lexicons -------------------------------------------------------------------------------
_NOT_NAMES = {
    "I", "Im", "Me", "My", "Mine", "We", "Us", "Our", "You", "Your", "He", "Him", "His", "She", "Her",
    "It", "Its", "They", "Them", "Their", "This", "That", "These", "Those", "There", "Here", "The", "A",
    "An", "And", "But", "Or", "So", "Then", "Now", "Well", "Yeah", "Yes", "No", "Not", "Oh", "Hey",
    "Hi", "Hello", "Also", "Just", "Still", "Really", "Actually", "Anyway", "Today", "Yesterday",
    "Tomorrow", "Tonight", "Everyone", "Everybody", "Someone", "Somebody", "Nobody", "Anyone",
    "What", "Who", "Why", "How", "When", "Where", "Which", "Mom", "Mum", "Dad", "Mother", "Father",
    "God", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday",
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December", "Christmas", "Easter", "Thanks", "Thank", "Sorry", "Please",
    "Sure", "Ok", "Okay", "Wow", "Lol", "Haha", "Great", "Good", "Nice", "Cool", "Awesome", "Love",
    "Let", "Lets", "If", "As", "At", "In", "On", "For", "With", "To", "From", "By", "Of", "Every",
    "All", "Both", "Some", "Many", "Most", "Much", "Each", "Maybe", "Perhaps", "Sometimes", "Always",
    "Never", "Last", "Next", "Recently", "Lately", "Since", "After", "Before", "While", "Because",
    "Although", "Though", "Do", "Does", "Did", "Is", "Are", "Was", "Were", "Will", "Would", "Can",
    "Could", "Should", "Have", "Has", "Had", "Being", "Been", "Be", "Guess", "Happy", "Dear",
    "Mr", "Mrs", "Ms", "Dr", "Sir", "Madam", "Ma'am", "Alright", "Absolutely", "Definitely",
    "Totally", "Honestly", "Btw", "Omg", "Um", "Uh", "Hmm", "Ah", "Aw", "Aww", "Sounds", "Sound",
    "Looks", "Look", "Seems", "Seem", "Feels", "Feel", "Feeling", "Almost", "Take", "Keep", "Make",
    "Thank", "Glad", "Hope", "Wish", "Congrats", "Congratulations", "Cheers", "Bye", "Nope", "Yep",
    "Yup", "Stay", "Enjoy", "Have", "Being", "Nothing", "Something", "Anything", "Everything",
    "Life", "Family", "Friends", "Music", "Art", "People", "Work", "School", "Home", "Mine",
    "Unconditional", "Basketball", "Football", "Soccer", "Painting", "Reading", "Writing", "Cooking",
}
_NATIONALITIES = {
    "American", "British", "English", "Scottish", "Welsh", "Irish", "Canadian", "Mexican",
    "Brazilian", "Argentinian", "Argentine", "Chilean", "Colombian", "Peruvian", "Cuban", "French",
    "German", "Italian", "Spanish", "Portuguese", "Dutch", "Belgian", "Swiss", "Austrian", "Swedish",
    "Norwegian", "Danish", "Finnish", "Polish", "Czech", "Hungarian", "Greek", "Turkish", "Russian",
    "Ukrainian", "Romanian", "Bulgarian", "Serbian", "Croatian", "Chinese", "Japanese", "Korean",
    "Vietnamese", "Thai", "Filipino", "Indonesian", "Malaysian", "Indian", "Pakistani",
    "Bangladeshi", "Iranian", "Iraqi", "Israeli", "Egyptian", "Moroccan", "Nigerian", "Kenyan",
    "Ethiopian", "Ghanaian", "South", "African", "Australian", "Kiwi", "Asian", "European", "Latino",
    "Latina", "Hispanic", "Arab", "Jewish", "Muslim", "Christian", "Catholic", "Protestant", "Hindu",
    "Buddhist", "Sikh", "Atheist", "Agnostic", "Mormon", "Republican", "Democrat", "Gemini",
    "Virgo", "Libra", "Scorpio", "Aries", "Taurus", "Cancer", "Sagittarius", "Capricorn", "Aquarius",
    "Pisces", "Vegan", "Vegetarian", "Trans", "Gay", "Bi", "Queer", "Single", "Married", "Retired",
    "Back", "Home", "Done", "Here", "Fine", "Sorry", "Glad", "Excited", "Ready", "Tired", "Busy",
}
_JOBS = {
    "teacher", "nurse", "doctor", "physician", "engineer", "developer", "programmer", "coder",
    "designer", "lawyer", "attorney", "accountant", "architect", "artist", "painter", "sculptor",
    "writer", "author", "novelist", "poet", "journalist", "reporter", "editor", "photographer",
    "chef", "cook", "baker", "butcher", "waiter", "waitress", "barista", "bartender", "server",
    "student", "professor", "lecturer", "researcher", "scientist", "manager", "consultant",
    "analyst", "entrepreneur", "founder", "co-founder", "cofounder", "ceo", "cto", "cfo", "coo",
    "pharmacist", "dentist", "therapist", "counselor", "counsellor", "psychologist",
    "psychiatrist", "worker", "firefighter", "officer", "cop", "detective", "soldier", "pilot",
    "driver", "mechanic", "electrician", "plumber", "carpenter", "farmer", "librarian",
    "musician", "singer", "songwriter", "dancer", "actor", "actress", "comedian", "translator",
    "interpreter", "tutor", "coach", "trainer", "veterinarian", "vet", "surgeon", "paramedic",
    "cashier", "clerk", "receptionist", "secretary", "administrator", "salesperson", "salesman",
    "saleswoman", "realtor", "agent", "banker", "economist", "mathematician", "physicist",
    "chemist", "biologist", "intern", "freelancer", "contractor", "nanny", "caregiver",
    "housekeeper", "janitor", "tailor", "hairdresser", "barber", "stylist", "florist",
    "jeweler", "gardener", "landscaper", "welder", "miner", "sailor", "fisherman", "principal",
    "coordinator", "director", "executive", "specialist", "technician", "assistant", "marketer",
    "strategist", "investor", "broker", "auditor", "judge", "paralegal", "pastor", "priest",
    "rabbi", "imam", "nun", "monk", "midwife", "optometrist", "physiotherapist", "programmer",
    "scientist", "streamer", "youtuber", "influencer", "blogger", "illustrator", "animator",
    "producer", "filmmaker", "dj", "guide", "recruiter", "lifeguard", "instructor", "professor",
    "homemaker", "housewife", "retiree", "pianist", "guitarist", "violinist", "drummer",
    "athlete", "footballer", "swimmer", "cyclist", "boxer", "potter", "carer", "doula",
    "sommelier", "brewer", "winemaker", "psychotherapist", "dietitian", "nutritionist",
    "radiologist", "surveyor", "inspector", "firefighter", "volunteer",
}
_JOB_SUFFIXES = ("ologist", "ician", "grapher", "ographer")
_BAD_JOB_MODIFIERS = {
    "good", "great", "bad", "terrible", "decent", "amazing", "awesome", "excellent", "huge", "big",
    "lousy", "poor", "better", "best", "worse", "worst", "horrible", "natural", "born", "pretty",
    "real", "little", "bit", "total", "complete", "fan", "wannabe", "aspiring", "future", "former",
    "ex", "retired", "failed", "frustrated", "struggling", "hopeless", "okay", "ok", "fine", "fast",
    "slow", "lazy", "picky", "messy", "type", "kind", "sort",
}
_POSSESSIONS = {
    # pets
    "dog", "dogs", "puppy", "puppies", "cat", "cats", "kitten", "kittens", "bird", "birds",
    "parrot", "hamster", "hamsters", "rabbit", "rabbits", "bunny", "fish", "goldfish", "horse",
    "horses", "pony", "turtle", "tortoise", "snake", "lizard", "gecko", "guinea pig", "ferret",
    "chickens", "pet", "pets", "retriever", "labrador", "poodle", "husky", "beagle", "terrier",
    "shepherd", "bulldog", "corgi", "dachshund", "chihuahua", "pug", "collie", "spaniel", "pup",
    # family
    "kid", "kids", "child", "children", "son", "sons", "daughter", "daughters", "baby", "babies",
    "sister", "sisters", "brother", "brothers", "sibling", "siblings", "twin", "twins",
    "grandchild", "grandchildren", "grandkids", "stepson", "stepdaughter",
    # vehicles, homes and other property
    "car", "cars", "bike", "bikes", "bicycle", "motorcycle", "motorbike", "truck", "boat", "van",
    "scooter", "rv", "camper", "house", "home", "apartment", "flat", "condo", "cabin", "cottage",
    "farm", "garden", "backyard", "pool", "studio", "yacht", "tesla",
    # instruments and gear
    "guitar", "piano", "violin", "drum", "drums", "drum kit", "keyboard", "ukulele", "cello",
    "saxophone", "trumpet", "flute", "camera", "telescope", "laptop", "computer", "pc", "tablet",
    "ipad", "iphone", "kindle", "3d printer", "sewing machine",
    # businesses
    "bakery", "shop", "store", "restaurant", "cafe", "café", "bar", "company", "business",
    "startup", "podcast", "blog", "channel", "website", "band",
}
_POSS_MODIFIERS = r"(?:(?:new|old|little|big|small|huge|cute|adorable|sweet|young|rescue|used|second-?hand|electric|vintage|beautiful|lovely|golden|black|white|brown|grey|gray|red|blue|green|tiny|own|first|second|third|pet|family|labrador|beagle|poodle|husky|persian|siamese|tabby|acoustic|classical|grand|digital|3-bedroom|two-bedroom|one-bedroom|small|lake|beach|country)\s+){0,3}"
_REL_NOUNS: dict[str, tuple[str, str]] = {
    # noun: (predicate from the speaker's side, object type)
    "wife": ("is_married_to", "person"), "husband": ("is_married_to", "person"),
    "spouse": ("is_married_to", "person"),
    "partner": ("partner_of", "person"), "boyfriend": ("partner_of", "person"),
    "girlfriend": ("partner_of", "person"), "fiance": ("partner_of", "person"),
    "fiancee": ("partner_of", "person"), "fiancé": ("partner_of", "person"),
    "fiancée": ("partner_of", "person"),
    "sister": ("sibling_of", "person"), "brother": ("sibling_of", "person"),
    "sibling": ("sibling_of", "person"), "twin": ("sibling_of", "person"),
    "mom": ("child_of", "person"), "mother": ("child_of", "person"), "mum": ("child_of", "person"),
    "dad": ("child_of", "person"), "father": ("child_of", "person"), "stepmom": ("child_of", "person"),
    "stepdad": ("child_of", "person"), "stepmother": ("child_of", "person"),
    "stepfather": ("child_of", "person"),
    "son": ("parent_of", "person"), "daughter": ("parent_of", "person"), "kid": ("parent_of", "person"),
    "child": ("parent_of", "person"), "stepson": ("parent_of", "person"),
    "stepdaughter": ("parent_of", "person"), "baby": ("parent_of", "person"),
    "grandma": ("grandchild_of", "person"), "grandmother": ("grandchild_of", "person"),
    "grandpa": ("grandchild_of", "person"), "grandfather": ("grandchild_of", "person"),
    "granny": ("grandchild_of", "person"),
    "grandson": ("grandparent_of", "person"), "granddaughter": ("grandparent_of", "person"),
    "aunt": ("relative_of", "person"), "uncle": ("relative_of", "person"),
    "cousin": ("relative_of", "person"), "niece": ("relative_of", "person"),
    "nephew": ("relative_of", "person"),
    "friend": ("friend_of", "person"), "buddy": ("friend_of", "person"), "bff": ("friend_of", "person"),
    "pal": ("friend_of", "person"),
    "colleague": ("colleague_of", "person"), "coworker": ("colleague_of", "person"),
    "co-worker": ("colleague_of", "person"), "boss": ("reports_to", "person"),
    "manager": ("reports_to", "person"),
    "roommate": ("roommate_of", "person"), "flatmate": ("roommate_of", "person"),
    "neighbor": ("neighbor_of", "person"), "neighbour": ("neighbor_of", "person"),
    "mentor": ("mentored_by", "person"), "therapist": ("sees_therapist", "person"),
}
_PETS = ("dog", "cat", "puppy", "kitten", "bird", "parrot", "hamster", "rabbit", "bunny", "horse",
         "pony", "turtle", "tortoise", "snake", "lizard", "gecko", "ferret", "fish", "goldfish", "pup")
_LANGUAGES = {
    "English", "Spanish", "French", "German", "Italian", "Portuguese", "Dutch", "Swedish",
    "Norwegian", "Danish", "Finnish", "Polish", "Czech", "Greek", "Turkish", "Russian", "Ukrainian",
    "Arabic", "Hebrew", "Hindi", "Urdu", "Bengali", "Punjabi", "Tamil", "Chinese", "Mandarin",
    "Cantonese", "Japanese", "Korean", "Vietnamese", "Thai", "Indonesian", "Malay", "Tagalog",
    "Swahili", "Persian", "Farsi", "Romanian", "Hungarian", "Latin", "Catalan", "Basque", "Irish",
    "Welsh", "Sign", "ASL",
}
_PLAYABLE = {
    "guitar", "piano", "violin", "drums", "bass", "cello", "ukulele", "saxophone", "sax", "trumpet",
    "flute", "harp", "keyboard", "clarinet", "banjo", "harmonica", "tennis", "soccer", "football",
    "basketball", "baseball", "volleyball", "golf", "chess", "hockey", "rugby", "cricket",
    "badminton", "squash", "poker", "bridge", "pool", "darts", "table tennis", "ping pong",
    "video games", "the guitar", "the piano", "the violin", "the drums", "the bass", "the cello",
    "the ukulele", "the flute", "the saxophone", "the trumpet", "the harp", "the keyboard",
    "the clarinet", "the banjo", "pickleball", "softball", "lacrosse",
}
_DIETS = ("lacto-ovo vegetarian", "lacto-vegetarian", "ovo-vegetarian", "raw vegan", "vegetarian", "vegan",
          "veggie", "pescatarian", "pescetarian", "flexitarian", "plant-based", "keto", "paleo")
_DIET_RE = "|".join(re.escape(d) for d in _DIETS)
# what may follow the diet word: nothing, or a time ("since 2019", "for ten years", "now")
_DIET_TAIL = re.compile(r"^(?:\s+(?:now|too|also|as well|these days|since\s+.+|for\s+.+|(?:last|this|in)\s+.+|"
                        r"\d+\s+\w+\s+ago|a\s+\w+\s+ago|ago))?\s*$", re.I)
_DID_ACTIVITIES = {
    "hiking", "camping", "swimming", "shopping", "fishing", "skiing", "snowboarding", "surfing",
    "running", "jogging", "biking", "cycling", "kayaking", "canoeing", "climbing", "rock climbing",
    "bowling", "dancing", "sailing", "skating", "ice skating", "horseback riding", "diving",
    "scuba diving", "snorkeling", "paddleboarding", "backpacking", "birdwatching", "hunting",
    "sightseeing", "trekking", "rafting", "golfing", "clubbing", "caroling", "apple picking",
    "berry picking", "stargazing", "boating", "roller skating", "sledding", "painting",
}
_PLAN_VERBS = {
    "start", "move", "visit", "travel", "go", "join", "quit", "leave", "marry", "buy", "sell",
    "learn", "study", "take", "run", "attend", "fly", "adopt", "retire", "launch", "build", "open",
    "apply", "begin", "switch", "get", "have", "host", "organize", "organise", "throw", "plan",
    "celebrate", "compete", "enter", "enroll", "sign", "volunteer", "write", "publish", "record",
    "renovate", "paint", "hike", "climb", "explore", "spend", "work", "change", "finish", "graduate",
    "become", "try", "see", "meet", "perform", "teach", "visit", "camp", "drive", "cook", "bake",
}
_GENERIC_OBJECTS = {
    "it", "that", "this", "them", "you", "him", "her", "me", "us", "those", "these", "what", "how",
    "when", "where", "why", "who", "which", "everything", "anything", "something", "nothing",
    "everyone", "anybody", "anyone", "someone", "somebody", "nobody", "myself", "yourself",
    "himself", "herself", "ourselves", "themselves", "there", "here", "one", "all", "some", "both",
    "lots", "much", "many", "your", "his", "their", "its", "the way", "the fact",
    "the idea", "the thought", "doing", "being", "having", "going", "getting", "making", "a lot",
    "lot", "more", "most", "less", "stuff", "things", "thing", "so", "too", "very", "such",
    "whatever", "other", "others", "each", "either", "neither", "own", "same", "way", "time",
    "kind", "sort", "type", "sure", "about", "like", "just", "really", "then", "now", "no",
    "not", "yes", "ok", "okay", "up", "out", "back", "off", "over", "well", "better", "best",
    "with", "to", "for", "at", "in", "on", "of", "from", "by", "into", "as", "than", "because",
    "everywhere", "anywhere", "somewhere", "nowhere", "fun", "plan", "blast", "idea", "is", "are",
    "was", "were", "be", "been", "even", "too", "still", "around", "along", "ton", "hard",
}
# an object with one of these words in it is a clause, not a thing ("it brings me joy")
_CLAUSE_WORDS = {"it", "it's", "its", "them", "they", "they're", "you", "you're", "your", "he", "she",
                 "him", "her", "we", "i", "i'm", "this", "that", "these", "those", "is", "are", "was",
                 "were", "be", "been", "am", "what", "which", "who", "how", "why", "when", "where",
                 "whatever", "something", "anything", "everything", "someone", "anyone", "he's",
                 "she's", "there's", "that's", "what's", "can", "will", "would", "should", "could"}
_DANGLING = {"about", "to", "with", "for", "of", "at", "in", "on", "from", "by", "how", "the", "a", "an",
             "and", "or", "my", "your", "our", "what", "that", "than", "as", "into", "like", "some",
             "more", "so", "very", "really", "just", "even", "every", "each", "all", "its", "his", "her"}
_FILLER_TAIL = re.compile(
    r"(?:\s+(?:a lot|so much|very much|too|also|as well|really|now|again|there|here|lately|"
    r"recently|these days|right now|at the moment|the most|more than anything|a ton|so|either|"
    r"though|already|anymore|any more|any longer|more|a bit|a little|actually|haha|lol|tho|"
    r"and stuff|and all|and everything|or so|or something|and things|and such|for sure|"
    r"for real|to be honest|honestly|together|in general|with a passion|like crazy|personally|"
    r"every day|everyday|all the time|all day|these days|nowadays|for now|for a while|"
    r"for years|for a long time|since forever|since then|since|ever since|about|around|almost|"
    r"nearly|over|like|even|though|a ton|hard|big time|quite a bit))+$",
    re.I)

# -- building blocks ------------------------------------------------------------------------
_CAP = r"[A-Z][A-Za-z'’.&-]*[A-Za-z0-9]|[A-Z]"
_CAPW = rf"(?:{_CAP}|\d+[A-Za-z]*)"
_LINK = r"(?:of|de|da|do|del|della|di|du|la|le|el|van|von|der|den|upon|on|am|and|&|the|for|y|al)"
# A proper name of a place or organisation: capitalised words, linkers between them,
# and an optional ", Region" ("Lisbon, Portugal").
_PROPER = rf"(?:[Tt]he\s+)?(?:{_CAP})(?:(?:\s+|-)(?:{_LINK}\s+)?(?:{_CAPW}))*(?:,\s+(?:{_CAP})(?:\s+(?:{_CAP}))?)?"
_NAME = r"[A-Z][a-z]+(?:[-'][A-Z][a-z]+)?(?:\s+[A-Z][a-z]+(?:[-'][A-Z][a-z]+)?)?"
_NAME_RE = re.compile(_NAME)
_PROPER_RE = re.compile(_PROPER)

_ADVERBS = re.compile(
    r"^(?:(?:really|also|still|currently|now|actually|just|recently|finally|totally|absolutely|"
    r"definitely|truly|honestly|kind of|sort of|kinda|sorta|pretty much|even|already|officially|"
    r"both|all|literally|seriously|genuinely|certainly|simply|mostly|mainly|basically|happily|"
    r"proudly|newly|originally|also now|now also|personally|secretly|kinda|luckily|fortunately|"
    r"unfortunately|sadly|recently just|just recently|then|currently still|once again|again)"
    r"\s+)+", re.I)
_INTRO = re.compile(
    r"^(?:(?:well|oh|ooh|yeah|yes|yep|yup|no|nope|nah|actually|so|also|and|but|anyway|anyways|btw|"
    r"by the way|honestly|haha+|hehe+|lol|um+|uh+|hmm+|ok|okay|now|guess what|fun fact|hey|hi|hello|"
    r"wow|sure|right|of course|in fact|you know|as you know|as i said|like i said|funny enough|"
    r"to be honest|tbh|omg|oh my god|oh yeah|ah+|aw+|true|exactly|absolutely|totally|indeed|"
    r"thanks|thank you|good news|news|update|recently|lately|these days|nowadays|currently|"
    r"right now|at the moment|since then|luckily|fortunately|unfortunately|sadly|besides|plus|"
    r"speaking of which|for what it's worth|in any case|then|also now|just so you know|fyi|"
    r"first|firstly|second|secondly|finally|lastly|meanwhile|otherwise|however|still)"
    r"(?:\s*[,!.:;\-—–]+\s*|\s+))+", re.I)

_QUESTION_START = re.compile(
    r"^(?:do|does|did|am|are|is|was|were|have|has|can|could|would|will|should|shall|what|where|who|"
    r"whom|whose|why|how|when|which|ever)\s+(?:you|he|she|they|we|it|there|i|your|u|ya|anyone|"
    r"anybody|someone|my|our)\b", re.I)
# a trailing "..., what's yours?" after a statement ("My name is Dana, and you?")
_TAG_QUESTION = re.compile(
    r"[,;]?\s*(?:and\s+you|and\s+yours|what\s+about\s+you|how\s+about\s+you|what(?:'s|\s+is)\s+yours|"
    r"how\s+are\s+you(?:\s+doing)?(?:\s+today)?|and\s+your\s+name|what(?:'s|\s+is)\s+your\s+name)\s*\?+\s*$",
    re.I)
_AUX_START = re.compile(r"^(?:do|does|did|am|are|is|was|were|have|has|can|could|would|will|should|shall|"
                        r"what|where|who|whom|whose|why|how|when|which|may|might|must)\b", re.I)
_HYPOTHETICAL_SENTENCE = re.compile(
    r"\b(?:if|unless|whether|imagine|imagining|suppose|supposing|pretend|pretending|hypothetically|"
    r"what if|wish|wished|wishing|dream|dreams|dreamed|dreamt|dreaming|fantasize|fantasise|"
    r"in theory|theoretically|role-?play|roleplaying|joke|joking|kidding)\b",
    re.I)
_REPORTED = re.compile(
    r"\b(?:said|says|say|saying|told|tells|tell|telling|asked|asks|ask|asking|claims?|claimed|"
    r"heard|hear|thinks?|thought|believes?|believed|according|mentioned|mentions|wrote|writes|"
    r"rumou?r|supposedly|apparently|allegedly|quote|quoted|reckon)\b", re.I)
_HYPOTHETICAL_CLAUSE = re.compile(
    r"(?-i:\bmay\b)|\b(?:would|could|might|maybe|perhaps|possibly|probably|should|shall|ought|must|can|"
    r"hope|hopes|hoped|hoping|want|wants|wanted|wanna|wish|need to|needs to|considering|"
    r"thinking about|thinking of|not sure|unsure|someday|one day|some day|eventually|"
    r"try to|trying to|tried to|almost|nearly|supposed to|pretend|i'd|we'd)\b", re.I)
_ANYMORE = re.compile(r"\s*\b(?:anymore|any more|any longer|no more)\b", re.I)

_CONTRACTION = re.compile(
    r"\b(?:(?P<i>[Ii])['’](?P<iv>m|ve|ll|d)|(?P<we>[Ww]e)['’](?P<wev>re|ve|ll|d)|(?P<cant>[Cc]an['’]?t)|"
    r"(?P<wont>[Ww]on['’]t)|(?P<aux>do|does|did|is|are|was|were|have|has|had)n['’]t|"
    r"(?P<bare>dont|doesnt|didnt|isnt|arent|wasnt)|(?P<gonna>gonna)|(?P<wanna>wanna)|"
    r"(?P<name>name)['’]s|(?P<fav>favou?rite)|(?P<got>(?:I|[Ww]e)\s+have\s+got))\b", re.I)
_HAVE_GOT = re.compile(r"\b(I|[Ww]e)\s+have\s+got\b")
_VERBS_AFTER = {"m": "am", "ve": "have", "ll": "will", "d": "would", "re": "are"}
_BARE = {"dont": "do not", "doesnt": "does not", "didnt": "did not", "isnt": "is not",
         "arent": "are not", "wasnt": "was not"}


def _expand(m: re.Match[str]) -> str:
    g = m.groupdict()
    if g["i"]:
        return f"{g['i']} {_VERBS_AFTER[g['iv'].lower()]}"
    if g["we"]:
        return f"{g['we']} {_VERBS_AFTER[g['wev'].lower()]}"
    if g["cant"]:
        return "cannot"
    if g["wont"]:
        return "will not"
    if g["aux"]:
        return f"{g['aux']} not"
    if g["bare"]:
        return _BARE[g["bare"].lower()]
    if g["gonna"]:
        return "going to"
    if g["wanna"]:
        return "want to"
    if g["name"]:
        return f"{g['name']} is"
    if g["fav"]:
        return "favorite"
    return m.group(0).split()[0] + " have"


_QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”|„[^“”]*[“”]|«[^»]*»")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[\"“A-Z0-9(])|\n+|(?<=[!?])(?=[A-Z])")
_CLAUSE_SPLIT = re.compile(
    r"\s*;\s*|\s*[–—]\s+|\s*,?\s+(?:and|but|so|because|cause|cuz|although|though|while|whereas|plus|since|"
    r"and also|and now|but now|and then)\s+(?=(?:I|i|we|We|[Mm]y|[Oo]ur)\b)|,\s+(?=(?:I|i|we|We)\s)")
_CONTINUATION = re.compile(
    r"\s*,?\s+(?:and|but)\s+(?=(?:also\s+|now\s+|still\s+|even\s+|currently\s+)?"
    r"(?:live|lives|work|works|love|loves|like|likes|enjoy|enjoys|have|has|own|owns|hate|hates|"
    r"moved|visited|attended|went|play|plays|speak|speaks|am|is|are|adopted|bought|got|joined|"
    r"started|decided|plan|plans|study|studies)\b)")

_STOP = (r"[,.;:!?()\[\]\"“”]|\s[-–—]\s|\s(?:because|cause|cuz|since|but|so|when|whenever|while|until|after|"
         r"before|as|though|although|if|unless|which|who|whom|whose|where|and then|or something|lol|"
         r"haha\w*|hehe\w*|and i|and we|but i|and my|whereas|plus|btw|tbh)\b")
_NP_STOP = re.compile(_STOP + r"|\s(?:with|for|during|every|each|these days|right now|at the moment|"
                               r"all the time|anymore|any more|instead|though)\b", re.I)
_EVENT_STOP = re.compile(_STOP + r"|\s(?:with|for|last|this|next|on|in|at|during|yesterday|today|"
                                  r"tomorrow|tonight|ago|and|to|from|by|where|over|around|together)\b", re.I)
_VP_STOP = re.compile(_STOP + r"|\s(?:with my|together|for sure|for real)\b", re.I)


def _cut(text: str, stop: re.Pattern[str]) -> str:
    m = stop.search(text)
    return text[: m.start()] if m else text


def _clean_object(obj: str, *, drop_article: bool = True) -> str:
    obj = obj.strip(" \t,.;:!?-–—'\"")
    prev = None
    while prev != obj:
        prev = obj
        obj = _FILLER_TAIL.sub("", obj).strip(" \t,.;:!?-–—'\"")
    if drop_article:
        obj = re.sub(r"^(?:a|an|the|some)\s+", "", obj)
    return obj


def _is_generic(obj: str) -> bool:
    words = obj.lower().split()
    if not words:
        return True
    bare = re.sub(r"^(?:a|an|the|some)\s+", "", obj.lower())
    return words[0] in _GENERIC_OBJECTS or obj.lower() in _GENERIC_OBJECTS or bare in _GENERIC_OBJECTS


def _gerund(verb: str) -> str:
    v = verb.lower()
    irregular = {"be": "being", "see": "seeing", "ski": "skiing", "die": "dying", "lie": "lying",
                 "tie": "tying", "flee": "fleeing", "agree": "agreeing", "free": "freeing",
                 "dye": "dyeing", "canoe": "canoeing", "hoe": "hoeing", "visit": "visiting",
                 "travel": "traveling", "garden": "gardening", "open": "opening", "listen": "listening",
                 "cook": "cooking", "read": "reading"}
    if v in irregular:
        return irregular[v]
    if v.endswith("ie"):
        return v[:-2] + "ying"
    if v.endswith("e") and not v.endswith(("ee", "ye", "oe")) and len(v) > 2:
        return v[:-1] + "ing"
    if (len(v) <= 4 and len(v) >= 3 and v[-1] not in "aeiouwxy" and v[-2] in "aeiou"
            and v[-3] not in "aeiou"):
        return v + v[-1] + "ing"
    return v + "ing"


def _article(noun_phrase: str) -> str:
    first = noun_phrase.split()[0].lower() if noun_phrase.split() else ""
    if first.isdigit() or first in {"two", "three", "four", "five", "six", "seven", "eight", "nine",
                                    "ten", "some", "several", "many", "a", "an", "the"}:
        return noun_phrase
    if noun_phrase.split()[-1].lower().endswith("s") and noun_phrase.split()[-1].lower() not in {
            "bus", "glass", "bass", "class", "grass", "boss", "canvas", "cactus", "walrus",
            "platypus", "octopus", "iris", "lotus", "chess", "business", "dress", "citrus"} \
            and noun_phrase.split()[-1].lower() in _POSSESSIONS:
        return noun_phrase
    return ("an " if first[:1] in "aeiou" and not first.startswith(("uni", "use", "eu", "one"))
            else "a ") + noun_phrase


def _names(text: str, *, strict: bool = False) -> str | None:
    """A person's name at the start of ``text`` (one or two capitalised words), or None.
    ``strict`` also refuses words that are more often adjectives ("I'm Canadian")."""
    m = _NAME_RE.match(text)
    if not m:
        return None
    words = m.group(0).split()
    bad = _NOT_NAMES | _NATIONALITIES | _LANGUAGES if strict else _NOT_NAMES | _LANGUAGES
    if words[0] in bad:
        return None
    end = m.end()
    if len(words) > 1 and words[1] in bad:
        words = words[:1]
        end = m.start() + len(words[0])
    if text[end:end + 1].isalnum():
        return None
    return " ".join(words)


def _proper(text: str) -> str | None:
    """A capitalised place or organisation name at the start of ``text``, or None."""
    m = _PROPER_RE.match(text)
    if not m:
        return None
    value = m.group(0)
    # trailing linkers ("Lisbon and") or month/day words ("Lisbon In May") are not part of it
    words = value.replace(",", " ,").split()
    while words and (words[-1] in (",",) or words[-1].lower() in {"of", "and", "&", "the", "on", "am",
                                                                  "for", "de", "la", "le"}
                     or words[-1] in _NOT_NAMES - {"May"} or words[-1] in {
                         "January", "February", "March", "April", "June", "July", "August",
                         "September", "October", "November", "December", "Monday", "Tuesday",
                         "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}):
        words.pop()
    if not words:
        return None
    value = " ".join(words).replace(" ,", ",")
    bare = re.sub(r"^[Tt]he\s+", "", value)
    if not bare or bare.split()[0] in _NOT_NAMES or bare.split()[0] in _NATIONALITIES - {"Back", "Home"}:
        return None
    return value


# -- the extractor --------------------------------------------------------------------------
class _Ctx:
    """What a clause's rules need: who "I" is, when it was said, where to put facts."""

    __slots__ = ("me", "ts", "turn", "out", "clause", "sentence", "verb")

    def __init__(self, me: str, turn: Turn, out: list[Fact]) -> None:
        self.me = me
        self.ts = turn.ts
        self.turn = turn
        self.out = out
        self.clause = ""
        self.sentence = ""
        self.verb: str | None = None

    def date(self, tense: str = "past") -> DateSpan | None:
        """The date phrase of the clause, else the only one of its sentence ("Last week, I ...")."""
        found = find_dates(self.clause, self.ts, tense=tense)
        if found:
            return found[0][0]
        found = find_dates(self.sentence, self.ts, tense=tense)
        return found[0][0] if len(found) == 1 else None

    def add(self, subject: str, predicate: str, obj: str, text: str, *, type: str = "fact",
            negated: bool = False, valid_from: int | None = None, confidence: float = 0.8,
            subject_type: str = "person", object_type: str = "entity") -> None:
        obj = obj.strip()
        if not obj or not subject:
            return
        if predicate == "name" and self.turn.speaker and obj.casefold() == subject.casefold():
            return  # "I'm Ann" said by Ann tells nothing new (said as user "ann", it tells the name)
        # the speaker's "my" and "me" inside a phrase ("visit my parents")
        obj = _MY.sub(f"{self.me}'s", _ME.sub(self.me, obj))
        text = _MY.sub(f"{self.me}'s", _ME.sub(self.me, text))
        text = text[0].upper() + text[1:] if text[:1].islower() else text
        self.out.append(Fact(
            text=text, subject=subject, predicate=predicate, object=obj, type=type,
            valid_from=valid_from, confidence=confidence, subject_type=subject_type,
            object_type=object_type, sources=[self.turn.bead] if self.turn.bead else [],
            negated=negated, meta={"extractor": "rules"}))


_MY = re.compile(r"\b(?:my|our)\b")
_ME = re.compile(r"\b(?:me|us|myself|ourselves)\b")

# verb forms: (third person, base form) used to word negated facts
_SAY: dict[str, tuple[str, str]] = {
    "lives_in": ("lives in", "live in"), "works_at": ("works at", "work at"),
    "likes": ("likes", "like"), "dislikes": ("dislikes", "dislike"), "has": ("has", "have"),
    "studies": ("studies", "study"), "studies_at": ("studies at", "study at"),
    "speaks": ("speaks", "speak"), "plays": ("plays", "play"), "plans": ("plans to", "plan to"),
}


def _say(pred: str, s: str, o: str, neg: str | None) -> str:
    v3, vb = _SAY[pred]
    if neg == "anymore":
        return f"{s} no longer {v3} {o}"
    if neg:
        return f"{s} does not {vb} {o}"
    return f"{s} {v3} {o}"


class RulesExtractor:
    """Offline rule-based extractor (see the module docstring for the patterns)."""

    name = "rules"
    prompt_version: str | None = None

    def __init__(self) -> None:
        self.last_report: dict[str, Any] = empty_report()

    def estimate(self, turns: list[Turn]) -> dict[str, int]:
        return {"calls": 0, "tokens": 0}

    def extract(self, turns: list[Turn]) -> list[Fact]:
        out: list[Fact] = []
        for turn in turns:
            out.extend(self.extract_turn(turn))
        self.last_report = empty_report()
        return out

    def extract_text(self, text: str, *, speaker: str | None = None, ts: int | None = None,
                     user: str = "default", bead: str | None = None) -> list[Fact]:
        return self.extract_turn(Turn(text=text, speaker=speaker, ts=ts, bead=bead, user=user))

    def extract_turn(self, turn: Turn) -> list[Fact]:
        if not person_turns([turn]):
            return []  # the agent's "I" (no speaker name): nothing a person said
        me = turn.speaker or turn.user
        out: list[Fact] = []
        ctx = _Ctx(me, turn, out)
        text = _QUOTED.sub(" ", turn.text.replace("’", "'").replace("‘", "'"))
        for sentence in _SENTENCE_SPLIT.split(text):
            sentence = " ".join(sentence.split())
            tag = _TAG_QUESTION.search(sentence)
            if tag and tag.start() > 0 and not _AUX_START.match(_INTRO.sub("", sentence)):
                sentence = sentence[:tag.start()].rstrip(" ,;") + "."
            if not sentence or _is_question(sentence):
                continue
            sentence = _CONTRACTION.sub(_expand, sentence)
            if "got" in sentence:  # "I've got a dog" = "I have a dog"
                sentence = _HAVE_GOT.sub(r"\1 have", sentence)
            if _HYPOTHETICAL_SENTENCE.search(sentence):
                continue
            ctx.clause = ctx.sentence = sentence
            if _ANYWHERE_HINT.search(sentence):
                _anywhere(sentence, ctx)
            if _REPORTED.search(sentence):
                continue
            for clause in _clauses(sentence):
                ctx.clause = clause
                _clause(clause, ctx)
        # one fact once per turn (the same thing said twice in a turn)
        seen: set[tuple] = set()
        unique = []
        for f in out:
            key = (f.subject, f.predicate, f.object.lower(), f.negated)
            if key not in seen and attributable(f, turn):
                seen.add(key)
                unique.append(f)
        return unique


def _is_question(sentence: str) -> bool:
    s = sentence.rstrip(" )\"'")
    return s.endswith("?") or bool(_QUESTION_START.match(_INTRO.sub("", s)))


def _clauses(sentence: str) -> list[str]:
    """The sentence cut into clauses that each start with their subject."""
    sentence = sentence.rstrip(" .!")
    parts: list[str] = []
    for piece in _CLAUSE_SPLIT.split(sentence):
        if not piece:
            continue
        pieces = _CONTINUATION.split(piece)
        subject = None
        for i, p in enumerate(pieces):
            p = _strip_intro(p)
            if i == 0:
                subject = _subject_prefix(p)
            elif subject:
                p = f"{subject} {p}"
            if p:
                parts.append(p)
    return parts


_STARTS_WITH_SUBJECT = re.compile(r"(?:I|i|[Ww]e|[Mm]y|[Oo]ur)\s")
_SUBJECT_AHEAD = re.compile(r"\s(?:I|i|we|We)\s")


def _strip_intro(clause: str) -> str:
    clause = _INTRO.sub("", clause.strip())
    # a leading time phrase ("Last week, I went ...")
    m = re.match(r"^([^,]{2,40}),\s+(?=(?:I|i|we|We|[Mm]y|[Oo]ur)\b)", clause)
    if m and (find_dates(m.group(1), 0) or re.match(
            r"(?i)(?:recently|lately|last|next|this|since|after|before|back in|earlier|later|"
            r"a (?:few|couple)|two|three|over|during|in|on|at|for)\b", m.group(1))):
        clause = clause[m.end():]
    elif not _STARTS_WITH_SUBJECT.match(clause) and _SUBJECT_AHEAD.search(clause[:60]):
        # "Last week I went ...", "Yesterday we moved ..."
        found = find_dates(clause[:40], 0)
        if found and found[0][1] == 0:
            m = re.match(r"^,?\s+(?=(?:I|i|we|We)\s)", clause[found[0][2]:])
            if m:
                clause = clause[found[0][2] + m.end():]
    return clause.strip()


_SUBJECT_PREFIX = re.compile(rf"^(?:I|i|[Ww]e|{_NAME})(?=\s)")


def _subject_prefix(clause: str) -> str | None:
    m = _SUBJECT_PREFIX.match(clause)
    if not m:
        return None
    if m.group(0)[0].isupper() and m.group(0) not in ("I", "We") and _names(clause) is None:
        return None
    return m.group(0)


# -- relations, pets and names found anywhere in a sentence ----------------------------------
_REL_RE = "|".join(sorted((re.escape(k) for k in _REL_NOUNS), key=len, reverse=True))
_REL_MOD = r"(?:(?:best|close|old|childhood|oldest|youngest|older|younger|little|big|baby|twin|dear|lovely|amazing|beautiful|wonderful|awesome|good|great|new|current|college|school|work|high school|step-?)\s+){0,2}"
_NO_EX = r"(?<!ex-)(?<!\bex )(?<!\blate )(?<!\bformer )(?<!\bdeceased )"
_MY_REL_NAME = re.compile(rf"\b(?:[Mm]y|[Oo]ur)\s+{_REL_MOD}{_NO_EX}(?P<rel>{_REL_RE})(?:,\s*|\s+)(?:named\s+|called\s+)?(?P<name>{_NAME})")
_MY_REL_IS_NAME = re.compile(
    rf"\b(?:[Mm]y|[Oo]ur)\s+{_REL_MOD}{_NO_EX}(?P<rel>{_REL_RE})(?:'s\s+name\s+is|\s+is\s+called|\s+is\s+named|,?\s+whose\s+name\s+is|\s+is)\s+(?P<name>{_NAME})")
_NAME_IS_MY_REL = re.compile(
    rf"(?:^|[,;]\s*|\band\s+)(?P<name>{_NAME}),?\s+is\s+(?:also\s+)?(?:[Mm]y|[Oo]ur)\s+{_REL_MOD}(?P<rel>{_REL_RE})\b(?!['-])")
_NAMES_REL_NAME = re.compile(
    rf"\b(?P<subj>{_NAME})'s\s+{_REL_MOD}{_NO_EX}(?P<rel>{_REL_RE})(?:,\s*|\s+)(?:named\s+|called\s+)?(?P<name>{_NAME})")
_PET_RE = "|".join(_PETS)
_MY_PET_NAME = re.compile(
    rf"\b(?:[Mm]y|[Oo]ur)\s+{_POSS_MODIFIERS}(?P<pet>{_PET_RE})(?:'s\s+name\s+is|\s+is\s+called|\s+is\s+named|,\s*|\s+)(?:named\s+|called\s+)?(?P<name>{_NAME})")
_CALL_ME = re.compile(
    rf"\b(?:(?:[Ee]veryone|[Ee]verybody|[Pp]eople|[Mm]ost people|[Mm]y friends|[Ff]riends|[Tt]hey)\s+calls?|"
    rf"[Cc]all)\s+me\s+(?P<name>{_NAME})")
_GO_BY = re.compile(rf"\b(?:I|[Ww]e)\s+(?:usually\s+|mostly\s+|just\s+)?go\s+by\s+(?P<name>{_NAME})")
_MY_NAME = re.compile(rf"\b[Mm]y\s+(?:first\s+|full\s+|real\s+)?name\s+is\s+(?P<name>{_NAME})")
# "my name is dana" (lower case): one word ending the clause, not an adjective
_MY_NAME_LOWER = re.compile(
    r"\b[Mm]y\s+(?:first\s+|real\s+)?name\s+is\s+(?P<name>[a-z][a-z'-]{1,20})"
    r"(?=\s*(?:$|[,.!;]|\s+(?:and|but|btw|by the way)\b))")
_NOT_LOWER_NAMES = {
    "not", "secret", "long", "weird", "private", "irrelevant", "unimportant", "unusual", "common", "rare",
    "hard", "difficult", "easy", "simple", "short", "funny", "complicated", "pronounced", "spelled",
    "same", "different", "unique", "mine", "fine", "nothing", "none", "whatever", "unknown", "anonymous",
    "classified", "confidential", "important", "boring", "cool", "nice", "great", "pretty", "beautiful",
    "lovely", "ugly", "strange", "odd", "here", "there", "above", "below", "changing", "changed",
    "legal", "official", "old", "new", "real", "fake", "famous", "popular", "traditional", "hidden",
}
# a negation or request just before "call me" ("please don't call me Dana", "never call me X")
_NAME_NEGATED = re.compile(r"(?:\bnot|\bnever|\bnobody|\bno one|\bstop|\bno longer)\s+(?:\w+\s+){0,2}$", re.I)
_MONTH_RE = ("(?:January|February|March|April|May|June|July|August|September|October|November|December|"
             "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)")
_DAY_RE = r"(?P<{0}>[0-3]?\d)(?:st|nd|rd|th)?"
_CAL_DATE = re.compile(
    rf"^(?:on\s+)?(?:(?:the\s+)?{_DAY_RE.format('d1')}\s+(?:of\s+)?(?P<m1>{_MONTH_RE})\.?|"
    rf"(?P<m2>{_MONTH_RE})\.?\s+(?:the\s+)?{_DAY_RE.format('d2')})(?:,?\s+(?P<y>(?:19|20)\d\d))?"
    r"(?=\s*(?:$|[,.!;]|\s+(?:and|but|so|btw|by the way|actually|too)\b))", re.I)
_BIRTHDAY = re.compile(
    rf"\b(?P<who>[Mm]y|{_NAME}'s)\s+(?:birthday|bday|b-day|date of birth)(?:'s|\s+is|\s+was|\s+falls\s+on)\s+"
    r"(?P<rest>.*)$")
_FAVORITE = re.compile(
    r"\b(?P<who>[Mm]y|[Oo]ur)\s+(?:absolute\s+|all-time\s+|new\s+)?favorite\s+(?P<what>[a-z]+(?:\s+[a-z]+)?)\s+(?:is|are|has to be|would have to be)\s+(?P<obj>[^,.;!?]+)")


def _rel_fact(ctx: _Ctx, subject: str, rel: str, name: str, *, neg: bool = False) -> None:
    rel_l = rel.lower()
    pred, otype = _REL_NOUNS[rel_l]
    if name == subject or name.split()[0] in _NOT_NAMES:
        return
    if pred == "is_married_to" or pred == "partner_of":
        text = f"{name} is {subject}'s {rel_l}"
    else:
        text = f"{name} is {subject}'s {rel_l}"
    if neg:
        text = f"{name} is no longer {subject}'s {rel_l}"
    ctx.add(subject, pred, name, text, negated=neg, object_type=otype, confidence=0.85)


_ANYWHERE_HINT = re.compile(r"\b(?:[Mm]y|[Oo]ur)\b|'s\b|\b[Cc]alls? me\b|\bgo by\b")


def calendar_day(text: str) -> tuple[int, int, int | None] | None:
    """(month, day, year or None) of a calendar date at the start of ``text`` ("June 3",
    "the 3rd of June, 1990", "3 Jun"), when it is a real day; else None."""
    import datetime as _dt

    m = _CAL_DATE.match(text.strip())
    if not m:
        return None
    month_word = (m.group("m1") or m.group("m2")).rstrip(".").capitalize()
    month = MONTHS.get(month_word)
    day = int(m.group("d1") or m.group("d2"))
    year = int(m.group("y")) if m.group("y") else None
    try:
        _dt.date(year or 2000, month, day)  # 2000: a leap year, so "February 29" is a birthday
    except (TypeError, ValueError):
        return None
    return month, day, year


_MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
                "October", "November", "December")


def _birthday(ctx: "_Ctx", subject: str, month: int, day: int, year: int | None) -> None:
    when = f"{_MONTH_NAMES[month - 1]} {day}"
    ctx.add(subject, "birthday", when, f"{subject}'s birthday is {when}", object_type="date", confidence=0.85)
    if year is not None:
        iso_day = f"{year:04d}-{month:02d}-{day:02d}"
        ctx.add(subject, "born_on", iso_day, f"{subject} was born on {when}, {year}", object_type="date",
                confidence=0.85)


def _anywhere(sentence: str, ctx: _Ctx) -> None:
    me = ctx.me
    for m in _MY_NAME.finditer(sentence):
        name = _names(m.group("name"))
        if name:
            ctx.add(me, "name", name, f"{me}'s name is {name}", confidence=0.9)
    for m in _MY_NAME_LOWER.finditer(sentence):
        word = m.group("name")
        if word not in _NOT_LOWER_NAMES and word not in _GENERIC_OBJECTS and word not in _CLAUSE_WORDS:
            name = word[0].upper() + word[1:]
            ctx.add(me, "name", name, f"{me}'s name is {name}", confidence=0.8)
    for pattern in (_CALL_ME, _GO_BY):
        for m in pattern.finditer(sentence):
            name = _names(m.group("name"))
            if name and not _NAME_NEGATED.search(sentence[:m.start()]) \
                    and not _HYPOTHETICAL_CLAUSE.search(sentence[:m.start()]):
                ctx.add(me, "name", name, f"{me}'s name is {name}", confidence=0.8)
    for m in _BIRTHDAY.finditer(sentence):
        who = m.group("who")
        subject = me if who.lower() == "my" else _names(who[:-2])
        found = calendar_day(m.group("rest"))
        if subject and found and not _HYPOTHETICAL_CLAUSE.search(sentence[:m.start()]):
            _birthday(ctx, subject, *found)
    for m in _MY_REL_NAME.finditer(sentence):
        name = _names(m.group("name"))
        if name:
            _rel_fact(ctx, me, m.group("rel"), name)
    for m in _MY_REL_IS_NAME.finditer(sentence):
        name = _names(m.group("name"))
        if name:
            _rel_fact(ctx, me, m.group("rel"), name)
    for m in _NAME_IS_MY_REL.finditer(sentence):
        name = _names(m.group("name"))
        if name:
            _rel_fact(ctx, me, m.group("rel"), name)
    for m in _NAMES_REL_NAME.finditer(sentence):
        subj = _names(m.group("subj"))
        name = _names(m.group("name"))
        if subj and name:
            _rel_fact(ctx, subj, m.group("rel"), name)
    for m in _MY_PET_NAME.finditer(sentence):
        name = _names(m.group("name"))
        if name:
            pet = m.group("pet").lower()
            obj = f"{pet} named {name}"
            ctx.add(me, "has", obj, f"{me} has {_article(obj)}", object_type="animal", confidence=0.85)
    for m in _FAVORITE.finditer(sentence):
        if _HYPOTHETICAL_CLAUSE.search(sentence) or _REPORTED.search(sentence):
            continue
        obj = _clean_object(_cut(m.group("obj"), _NP_STOP), drop_article=False)
        if obj and not _is_generic(obj) and len(obj.split()) <= 6:
            what = m.group("what")
            ctx.add(me, "likes", _clean_object(obj), f"{me}'s favorite {what} is {obj}",
                    type="preference", object_type="thing", confidence=0.85)


# -- one clause -------------------------------------------------------------------------------
_FIRST = re.compile(r"^(?:I|i|[Ww]e)\s+")
_THIRD_OK = {"is", "was", "has", "does", "no", "used", "will", "just", "also", "still", "recently",
             "finally", "really", "actually", "now", "currently", "never", "got", "went", "ran", "won",
             "began", "took", "sold", "bought", "chose", "left", "quit", "flew", "drove", "gave", "lost",
             "made", "spoke", "always", "loves", "lives"}
_THIRD = re.compile(rf"^(?P<name>{_NAME})\s+")


def _clause(clause: str, ctx: _Ctx) -> None:
    clause = clause.strip()
    m = _FIRST.match(clause)
    if m:
        subject, first = ctx.me, True
        rest = clause[m.end():]
    else:
        m = _THIRD.match(clause)
        if not m:
            return
        name = _names(clause)
        if not name:
            return
        subject, first = name, False
        rest = clause[len(name):].lstrip()
        # a name takes "lives", "is", "moved": "Sounds like fun" is no one liking fun
        verb = rest.split(" ", 1)[0].lower() if rest else ""
        if not (verb.endswith("s") or verb.endswith("ed") or verb in _THIRD_OK):
            return
    if _HYPOTHETICAL_CLAUSE.search(rest):
        return
    rest, n = _ANYMORE.subn("", rest)
    anymore = n > 0
    rest = _ADVERBS.sub("", rest)
    neg: str | None = None
    mm = re.match(r"^(?:do|does)\s+not\s+", rest, re.I)
    if mm:
        neg = "anymore" if anymore else "plain"
        rest = rest[mm.end():]
    elif re.match(r"^(?:did\s+not|never|have\s+not|has\s+not|was\s+not|were\s+not)\b", rest, re.I):
        return
    else:
        mm = re.match(r"^(?:no\s+longer|used\s+to)\s+", rest, re.I)
        if mm:
            neg = "anymore"
            rest = rest[mm.end():]
        elif anymore and not re.match(r"^(?:am|is|are)\s+(?:not|no\s+longer)\b", rest, re.I):
            return  # "anymore" without a negation ("I love it anymore"): not understood
    mm = re.match(r"^(?:do|does)\s+(?=\w)", rest, re.I)  # emphatic "I do love"
    if mm and not neg:
        rest = rest[mm.end():]
    rest = _ADVERBS.sub("", rest)
    # perfect tenses: "I have always loved", "I have lived", "I have been ..."
    mm = re.match(r"^(?:have|has)\s+(?:always\s+|long\s+|just\s+|recently\s+|now\s+|also\s+|finally\s+)*"
                  r"(?P<pp>loved|liked|enjoyed|hated|lived|worked|been|moved|decided|started|joined|"
                  r"adopted|bought|got|visited|chosen|picked|owned|had|studied|played|spoken)\b\s*", rest, re.I)
    perfect = False
    if mm:
        perfect = True
        pp = mm.group("pp").lower()
        base = {"loved": "love", "liked": "like", "enjoyed": "enjoy", "hated": "hate", "lived": "live",
                "worked": "work", "owned": "own", "had": "have", "studied": "study", "played": "play",
                "spoken": "speak", "chosen": "chose"}.get(pp, pp)
        rest = ("am " + rest[mm.end():]) if pp == "been" else (base + " " + rest[mm.end():])
    if re.match(r"^(?:am|is|are)\b", rest, re.I):
        be = re.match(r"^(?:am|is|are)\s+", rest, re.I)
        body = rest[be.end():] if be else ""
        body = _ADVERBS.sub("", body)
        mm = re.match(r"^not\s+", body, re.I)
        if mm:
            if neg:
                return
            neg = "anymore" if anymore else "plain"
            body = _ADVERBS.sub("", body[mm.end():])
        else:
            mm = re.match(r"^no\s+longer\s+", body, re.I)
            if mm:
                neg = "anymore"
                body = _ADVERBS.sub("", body[mm.end():])
        _be(body, subject, first, neg, ctx, perfect=perfect)
        return
    mm = re.match(r"^(?:was|were)\s+born\s+on\s+", rest, re.I)
    if mm:
        found = calendar_day(rest[mm.end():])
        if found and not neg:
            _birthday(ctx, subject, *found)
        return
    mm = re.match(r"^(?:was|were)\s+born\s+in\s+((?:19|20)\d\d)\s*$", rest, re.I)
    if mm:
        if not neg:
            ctx.add(subject, "birth_year", mm.group(1), f"{subject} was born in {mm.group(1)}",
                    object_type="number", confidence=0.8)
        return
    if re.match(r"^(?:was|were)\s+born\s+in\s+", rest, re.I):
        place = _proper(re.sub(r"^(?:was|were)\s+born\s+in\s+", "", rest, flags=re.I))
        if place and not neg and not re.fullmatch(r"(?:19|20)\d\d", place):
            ctx.add(subject, "born_in", _bare(place), f"{subject} was born in {place}",
                    object_type="place", confidence=0.85)
        return
    if re.match(r"^(?:was|were)\b", rest, re.I):
        _was(rest, subject, neg, ctx)
        return
    if re.match(r"^will\s+", rest, re.I):
        if neg:
            return
        body = _ADVERBS.sub("", re.sub(r"^will\s+", "", rest, flags=re.I))
        if re.match(r"^(?:be\s+)?(?:moving|relocating)\s+to\s+", body, re.I):
            place = _proper(re.sub(r"^(?:be\s+)?(?:moving|relocating)\s+to\s+", "", body, flags=re.I))
            if place:
                _plan(ctx, subject, f"move to {place}", strict=False)
            return
        if re.match(r"^be\s+", body, re.I):
            return
        _plan(ctx, subject, body, strict=True)
        return
    _verb(rest, subject, first, neg, ctx, perfect=perfect)


def _bare(value: str) -> str:
    return re.sub(r"^[Tt]he\s+", "", value)


def _plan(ctx: _Ctx, subject: str, vp: str, *, strict: bool, neg: str | None = None) -> None:
    """A plan: ``vp`` is the verb phrase ("visit Japan next month")."""
    span = ctx.date("future")
    vp_clean = _clean_object(_cut(vp, _VP_STOP), drop_article=False)
    # take the date phrase out of the verb phrase
    for found, a, b in find_dates(vp_clean, ctx.ts, tense="future"):
        vp_clean = vp_clean[:a] + vp_clean[b:]
    vp_clean = re.sub(r"\s+(?:in|on|at|by|around|for|during)\s*$", "", " ".join(vp_clean.split()))
    vp_clean = _clean_object(vp_clean, drop_article=False)
    words = vp_clean.split()
    if not words or not re.fullmatch(r"[a-z][a-z-]*", words[0]) or len(words) > 10:
        return
    if words[0] in _GENERIC_OBJECTS or words[0] in {"the", "a", "an", "to", "be", "let", "keep", "make"}:
        return
    if strict and words[0] not in _PLAN_VERBS:
        return
    if strict and words[0] in {"see", "try", "get", "have", "go"} and span is None:
        return
    if span is not None and ctx.ts is not None and span.end <= ctx.ts:  # a plan in the past
        return
    if not _thing_like(vp_clean):
        return
    if len(words) == 1 and words[0] not in {"retire", "graduate", "travel", "move", "quit", "marry"}:
        return
    when = f" {span.describe()}" if span else ""
    if neg:
        text = f"{subject} no longer plans to {vp_clean}"
    else:
        text = f"{subject} plans to {vp_clean}{when}"
    ctx.add(subject, "plans", vp_clean, text, negated=bool(neg), object_type="activity", confidence=0.75)


def _be(body: str, subject: str, first: bool, neg: str | None, ctx: _Ctx, *, perfect: bool) -> None:
    """After "I am" / "Ann is" (``neg``: "I am not", "I am no longer")."""
    m = re.match(rf"^(?:a\s+|an\s+|on\s+a\s+|on\s+an\s+)?(?:(?:strict|full|committed|lifelong|proud|total|complete|"
                 rf"practicing|practising|fully|full-time)\s+)?(?P<d>{_DIET_RE})(?:\s+diet)?(?P<tail>.*)$", body, re.I)
    if m and _diet(ctx, subject, m.group("d"), m.group("tail"), neg):
        return
    # age
    m = re.match(r"^(\d{1,3})(?:\s+(?:years?|yrs?)(?:\s+old)?|\s*y/?o)?\s*$", body)
    if m:
        age = int(m.group(1))
        if 1 <= age <= 120 and not neg:
            ctx.add(subject, "age", str(age), f"{subject} is {age} years old", object_type="number",
                    confidence=0.8)
        return
    # jobs: "a nurse", "a software engineer at Google", "a student at MIT"
    m = re.match(r"^(?:now\s+|currently\s+|also\s+)?(?:a|an)\s+(?P<np>[A-Za-z-]+(?:\s+[A-Za-z-]+){0,3}?)"
                 r"(?=\s*$|\s*,|\s+(?:at|for|with|in|and|who|from|based|working|by|since|of|now|too|"
                 r"myself|full-time|part-time|here|there)\b|'s)(?P<tail>.*)$", body)
    if m:
        words = m.group("np").split()
        job = words[-1].lower()
        mods = words[:-1]
        head_ok = job in _JOBS or job.endswith(_JOB_SUFFIXES)
        if head_ok and not any(w.lower() in _BAD_JOB_MODIFIERS for w in mods) and not (
                len(mods) and mods[0].lower() in {"fan", "bit", "lot"}):
            np = " ".join(words)
            tail = m.group("tail").strip()
            # "a fan of", "a teacher's" etc. are not jobs
            if tail.startswith(("of ", "'s")) and job not in ("student",):
                if not tail.startswith("of "):
                    return
                if job not in {"professor", "director", "manager", "founder", "co-founder", "cofounder"}:
                    return
            if job == "student":
                ctx.add(subject, "works_as", np.lower(), _neg_be(subject, f"a {np.lower()}", neg) or
                        f"{subject} is {_article(np.lower())}", negated=bool(neg), object_type="role",
                        confidence=0.8)
                at = re.match(r"^(?:at|in)\s+(.*)$", tail)
                if at and not neg:
                    org = _proper(at.group(1))
                    if org:
                        ctx.add(subject, "studies_at", _bare(org), f"{subject} studies at {org}",
                                object_type="organization", confidence=0.8)
                return
            ctx.add(subject, "works_as", np.lower(), _neg_be(subject, _article(np.lower()), neg) or
                    f"{subject} is {_article(np.lower())}", negated=bool(neg), object_type="role",
                    confidence=0.8)
            at = re.match(r"^(?:at|for|with)\s+(.*)$", tail)
            if at and not neg:
                org = _proper(at.group(1))
                if org:
                    ctx.add(subject, "works_at", _bare(org), f"{subject} works at {org}",
                            object_type="organization", confidence=0.75)
            return
    # from
    m = re.match(r"^(?:originally\s+)?from\s+(.*)$", body)
    if m:
        place = _proper(m.group(1))
        if place and not neg:
            ctx.add(subject, "from", _bare(place), f"{subject} is from {place}", object_type="place",
                    confidence=0.85)
        return
    # living / based in
    m = re.match(r"^(?:living|based|settled|residing)\s+(?:now\s+)?in\s+(.*)$", body)
    if m:
        place = _proper(m.group(1))
        if place:
            ctx.add(subject, "lives_in", _bare(place), _say("lives_in", subject, place, neg),
                    negated=bool(neg), object_type="place", confidence=0.85)
        return
    m = re.match(r"^(?:working|employed)\s+(?:at|for|by)\s+(.*)$", body)
    if m:
        org = _proper(m.group(1))
        if org:
            ctx.add(subject, "works_at", _bare(org), _say("works_at", subject, org, neg),
                    negated=bool(neg), object_type="organization", confidence=0.85)
        return
    m = re.match(r"^working\s+as\s+(?:an?\s+)?(.*)$", body)
    if m:
        _works_as(ctx, subject, m.group(1), neg)
        return
    # married / engaged
    m = re.match(r"^(?:happily\s+)?(?P<how>married|engaged)\s+to\s+(?P<rest>.*)$", body)
    if m:
        name = _names(m.group("rest"))
        if name:
            pred = "is_married_to" if m.group("how") == "married" else "partner_of"
            word = "married" if pred == "is_married_to" else "engaged"
            text = (f"{subject} is no longer {word} to {name}" if neg == "anymore"
                    else f"{subject} is not {word} to {name}" if neg else f"{subject} is {word} to {name}")
            ctx.add(subject, pred, name, text, negated=bool(neg), object_type="person", confidence=0.85)
        return
    # plans
    m = re.match(r"^(?:planning|intending|preparing|scheduled|set|about)\s+(?:to|on)\s+(.*)$", body)
    if m and not neg:
        vp = m.group(1)
        mm = re.match(r"^([a-z]+ing)\b(.*)$", vp)  # "planning on visiting X"
        if mm:
            vp = _ungerund(mm.group(1)) + mm.group(2)
        _plan(ctx, subject, vp, strict=False)
        return
    m = re.match(r"^going\s+to\s+(.*)$", body)
    if m and not neg:
        vp = m.group(1)
        place = _proper(vp) if vp[:1].isupper() else None
        if place:
            _plan(ctx, subject, f"go to {place} " + vp[len(place):], strict=False)
        elif re.match(r"^(?:the|a|an|my|our|his|her|their|be|see|have|try|get|do|need)\b", vp, re.I) is None:
            _plan(ctx, subject, vp, strict=True)
        return
    m = re.match(r"^(?:moving|relocating)\s+(?:back\s+)?to\s+(.*)$", body)
    if m and not neg:
        place = _proper(m.group(1))
        if place:
            _plan(ctx, subject, f"move to {place} " + m.group(1)[len(place):], strict=False)
        return
    # likes in be-form
    m = re.match(r"^(?:(?:really|so|super|very|totally|quite|pretty|a\s+bit|also)\s+)*"
                 r"(?P<how>into|obsessed\s+with|passionate\s+about|crazy\s+about|addicted\s+to|"
                 r"(?:a\s+)?(?:big\s+|huge\s+|massive\s+|great\s+|real\s+)?fan\s+of|keen\s+on|"
                 r"fond\s+of|interested\s+in)\s+(?P<obj>.*)$", body, re.I)
    if m:
        _likes(ctx, subject, m.group("obj"), negative=False, neg=neg,
               weak=m.group("how").lower().startswith("interested"))
        return
    m = re.match(r"^allergic\s+to\s+(.*)$", body)
    if m and not neg:
        obj = _np(m.group(1))
        if obj:
            ctx.add(subject, "allergic_to", _clean_object(obj), f"{subject} is allergic to {obj}",
                    object_type="thing", confidence=0.85)
        return
    m = re.match(r"^(?:learning|studying)\s+(.*)$", body)
    if m and not neg:
        _studies(ctx, subject, m.group(1), neg)
        return
    m = re.match(r"^(?:a\s+)?(?:member|part)\s+of\s+(.*)$", body)
    if m:
        obj = _np(m.group(1), max_words=6)
        if obj and (obj[:1].isupper() or re.search(
                r"\b(?:club|team|group|band|association|society|church|choir|union|party|community|"
                r"organi[sz]ation|league|council|committee|board|crew|brigade|guild|network|orchestra|"
                r"chapter|circle|collective|cooperative|gym|program|programme|army|navy)\b", obj, re.I)):
            text = (f"{subject} is no longer a member of {obj}" if neg == "anymore"
                    else f"{subject} is not a member of {obj}" if neg else f"{subject} is a member of {obj}")
            ctx.add(subject, "member_of", _clean_object(obj), text, negated=bool(neg),
                    object_type="organization", confidence=0.75)
        return
    m = re.match(r"^(?:called|named)\s+(.*)$", body)
    if m and first and not neg:
        name = _names(m.group(1))
        if name:
            ctx.add(subject, "name", name, f"{subject}'s name is {name}", confidence=0.8)
        return
    # "I am Ann" (only a lone capitalised name ending the clause)
    if first and not neg and not perfect:
        m = re.match(rf"^({_NAME})(?:\s*,?\s*(?:(?:it's\s+|it\s+is\s+)?(?:nice|pleased|good|great|glad|lovely)\s+to\s+"
                     rf"meet\s+you|by the way|btw))?\s*$", body)
        if m:
            name = _names(m.group(1), strict=True)
            if name and name not in _NATIONALITIES and not any(w in _NATIONALITIES for w in name.split()):
                ctx.add(subject, "name", name, f"{subject}'s name is {name}", confidence=0.7)


def _neg_be(subject: str, np: str, neg: str | None) -> str | None:
    if neg == "anymore":
        return f"{subject} is no longer {np}"
    if neg:
        return f"{subject} is not {np}"
    return None


def _ungerund(word: str) -> str:
    w = word.lower()
    special = {"visiting": "visit", "traveling": "travel", "travelling": "travel", "moving": "move",
               "taking": "take", "making": "make", "having": "have", "going": "go", "getting": "get",
               "starting": "start", "buying": "buy", "doing": "do", "running": "run", "leaving": "leave",
               "quitting": "quit", "writing": "write", "hiking": "hike", "adopting": "adopt",
               "joining": "join", "learning": "learn", "opening": "open", "selling": "sell",
               "retiring": "retire", "hosting": "host", "throwing": "throw", "spending": "spend",
               "coming": "come", "driving": "drive", "flying": "fly", "baking": "bake",
               "attending": "attend", "applying": "apply", "building": "build", "launching": "launch",
               "studying": "study", "camping": "camp", "swimming": "swim", "painting": "paint",
               "seeing": "see", "trying": "try", "giving": "give", "renovating": "renovate"}
    return special.get(w, w[:-3])


def _np(text: str, *, max_words: int = 8, stop: re.Pattern[str] = _NP_STOP) -> str | None:
    """A noun phrase at the start of ``text``, cut at the clause's end, or None."""
    for _, a, b in reversed(find_dates(text, 0)):  # a date phrase ends the phrase
        text = text[:a].rstrip() + " ," + text[b:]
    cut = _cut(text, stop)
    if _has_clause_words(cut):
        return None
    obj = _clean_object(cut, drop_article=False)
    obj = re.sub(r"\s+(?:in|on|at|by|around|for|during|about)\s*$", "", obj)
    obj = _clean_object(obj, drop_article=False)
    if not obj or _is_generic(obj) or len(obj.split()) > max_words or not _thing_like(obj):
        return None
    return obj


def _has_clause_words(text: str) -> bool:
    return any(w.strip(",.!?-") in _CLAUSE_WORDS for w in text.lower().replace("'s ", " 's ").split())


def _thing_like(obj: str) -> bool:
    """No clause words ("it's", "them", "you") and nothing dangling at the end ("write about")."""
    words = obj.lower().replace("'s ", " 's ").split()
    if not words or not re.search(r"[a-z]", obj.lower()):
        return False
    if any(w.strip(",.!?-") in _CLAUSE_WORDS for w in words):
        return False
    return words[-1].strip(",.!?-") not in _DANGLING


def _likes(ctx: _Ctx, subject: str, text: str, *, negative: bool, neg: str | None,
           weak: bool = False) -> None:
    """``text`` follows "like"/"hate" (or "am into", "am a fan of")."""
    if negative and neg:  # "I don't hate X": not understood
        return
    if neg == "plain" and not negative:  # "I don't like X" = dislikes X
        negative, neg = True, None
    text = text.strip()
    m = re.match(r"^to\s+([a-z]+)\b(.*)$", text)
    infinitive = bool(m)
    if m:
        if m.group(1) in {"be", "think", "know", "say", "keep", "make", "have", "get", "do", "see",
                          "let", "believe", "feel", "imagine", "hear", "call"}:
            return
        text = _gerund(m.group(1)) + m.group(2)
    listed = _LIST.match(text)
    if listed and len(_split_list(listed.group(0))) > 1:
        parts = _split_list(listed.group(0))
    else:
        obj = _np(text, max_words=6)
        if not obj:
            return
        parts = _split_list(obj)
    for part in parts:
        clean = _clean_object(part)
        if not clean or _is_generic(clean):
            continue
        otype = "activity" if clean.split()[0].endswith("ing") or infinitive else (
            "entity" if clean[:1].isupper() else "thing")
        if negative:
            ctx.add(subject, "dislikes", clean, f"{subject} dislikes {part}", type="preference",
                    object_type=otype, confidence=0.8)
        else:
            ctx.add(subject, "likes", clean, _say("likes", subject, part, neg), type="preference",
                    negated=bool(neg), object_type=otype, confidence=0.7 if weak else 0.8)


_ITEM = r"[A-Za-z][\w'-]*(?:\s+[A-Za-z][\w'-]*){0,2}"
_LIST = re.compile(rf"{_ITEM}(?:,\s*{_ITEM})+,?\s+(?:and|or)\s+{_ITEM}(?=\s*(?:$|[.;!?]))")


def _split_list(obj: str) -> list[str]:
    """ "hiking, camping and swimming" -> three; "rock and roll" stays one."""
    parts = [p.strip() for p in re.split(r",\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+", obj) if p.strip()]
    if len(parts) < 2:
        return [obj]
    if all(p.split()[0].endswith("ing") for p in parts) or all(p[:1].isupper() for p in parts):
        return parts
    if "," in obj and all(len(p.split()) <= 3 for p in parts):
        return parts
    return [obj]


def _works_as(ctx: _Ctx, subject: str, text: str, neg: str | None) -> None:
    obj = _np(text, max_words=4, stop=re.compile(_NP_STOP.pattern + r"|\s(?:at|in|on)\b", re.I))
    if not obj:
        return
    role = _clean_object(obj).lower()
    if not role or any(w in _BAD_JOB_MODIFIERS for w in role.split()[:-1]):
        return
    text = (f"{subject} no longer works as {_article(role)}" if neg == "anymore"
            else f"{subject} does not work as {_article(role)}" if neg else f"{subject} works as {_article(role)}")
    ctx.add(subject, "works_as", role, text, negated=bool(neg), object_type="role", confidence=0.8)


def _studies(ctx: _Ctx, subject: str, text: str, neg: str | None) -> None:
    m = re.match(r"^(?P<what>.*?)\s+at\s+(?P<org>[A-Z].*)$", text)
    what = m.group("what") if m else text
    obj = _np(what, max_words=4, stop=re.compile(_NP_STOP.pattern + r"|\s(?:at|in|on|to|from)\b", re.I))
    if obj and not obj[0].isdigit():
        ctx.add(subject, "studies", _clean_object(obj), _say("studies", subject, obj, neg),
                negated=bool(neg), object_type="subject", confidence=0.75)
    if m:
        org = _proper(m.group("org"))
        if org:
            ctx.add(subject, "studies_at", _bare(org), _say("studies_at", subject, org, neg),
                    negated=bool(neg), object_type="organization", confidence=0.75)


def _was(rest: str, subject: str, neg: str | None, ctx: _Ctx) -> None:
    """ "I was at the concert yesterday" -> attended (only with a date)."""
    m = re.match(r"^(?:was|were)\s+at\s+(.*)$", rest, re.I)
    if m and not neg:
        span = ctx.date()
        if span is None:
            return
        obj = _np(m.group(1), max_words=6, stop=_EVENT_STOP)
        if obj and not obj[0].isupper() and re.match(r"^(?:a|an|the)\s", obj):
            ctx.add(subject, "attended", _clean_object(obj), f"{subject} was at {obj} {span.describe()}",
                    valid_from=span.start, object_type="event", confidence=0.7)


def _has(ctx: _Ctx, subject: str, text: str, neg: str | None, *, acquired: bool, verb: str) -> None:
    m = re.match(rf"^(?P<q>a|an|one|two|three|four|five|six|seven|eight|nine|ten|\d{{1,2}}|my\s+own|a\s+new|another|some|several)\s+"
                 rf"(?P<np>{_POSS_MODIFIERS}(?P<head>guinea pig|drum kit|3d printer|sewing machine|[a-z]+))\b"
                 rf"(?:(?:,\s*|\s+)(?:named|called)\s+(?P<name>{_NAME}))?", text, re.I)
    if not m:
        return
    head = m.group("head").lower()
    if head not in _POSSESSIONS:
        return
    q = m.group("q").lower()
    np = m.group("np").strip().lower()
    if q not in ("a", "an", "one", "my own", "a new", "another", "some"):
        np = f"{q} {np}"
    elif q == "a new":
        np = f"new {np}" if not np.startswith("new ") else np
    name = _names(m.group("name")) if m.group("name") else None
    obj = f"{np} named {name}" if name else np
    span = ctx.date() if acquired else None
    if acquired:
        text_out = f"{subject} {verb} {_article(obj)}" + (f" {span.describe()}" if span else "")
    else:
        text_out = _say("has", subject, _article(obj), neg)
    otype = "animal" if head.rstrip("s") in _PETS or head in ("puppies", "fish") else (
        "person" if head in {"kid", "kids", "child", "children", "son", "sons", "daughter", "daughters",
                             "baby", "babies", "sister", "sisters", "brother", "brothers", "sibling",
                             "siblings", "twin", "twins", "grandchild", "grandchildren", "grandkids",
                             "stepson", "stepdaughter"} else "thing")
    ctx.add(subject, "has", obj, text_out, negated=bool(neg), valid_from=span.start if span else None,
            object_type=otype, confidence=0.8)


def _event(ctx: _Ctx, subject: str, pred: str, text: str, verb_text: str, *, need_date: bool) -> None:
    span = ctx.date()
    if span is None and need_date:
        return
    place = _proper(text) if text[:1].isupper() or text.startswith("the ") and text[4:5].isupper() else None
    if place:
        obj, otype = place, "place" if pred == "visited" else "event"
    else:
        if pred == "visited" and span is None:
            return
        obj = _np(text, max_words=6, stop=_EVENT_STOP)
        if not obj or re.match(r"^(?:bed|sleep|work|school|church|class|lunch|dinner|breakfast|the bathroom|"
                               r"the toilet|the kitchen|the store|the shop|the shops|the gym|the office|"
                               r"home|town|it|there|his|her|their|your|my (?:place|room|house|home|office|"
                               r"desk|car|bed))\b", obj, re.I):
            return
        otype = "event"
    when = f" {span.describe()}" if span else ""
    ctx.add(subject, pred, _bare(obj) if place else _clean_object(obj), f"{subject} {verb_text} {obj}{when}",
            valid_from=span.start if span else None, object_type=otype, confidence=0.75)


_VERB_RULES: list[tuple[re.Pattern[str], str]] = [(re.compile(p, re.I), name) for p, name in [
    (r"^(?:live|lives|reside|resides)\s+in\s+(?P<x>.*)$", "live"),
    (r"^(?:lived)\s+in\s+(?P<x>.*)$", "lived"),
    (r"^(?:just\s+|recently\s+|finally\s+|officially\s+)?(?:moved|relocated)\s+(?:back\s+|here\s+|over\s+)?to\s+(?P<x>.*)$", "moved"),
    (r"^(?:just\s+|recently\s+|finally\s+|officially\s+)?(?:moved|relocated)\s+(?:back\s+|here\s+|over\s+|away\s+|out\s+)?(?:from|out\s+of)\s+(?P<x>.*)$", "moved_from"),
    (rf"^(?:went|became|turned|switched\s+to\s+being|gone|become|started\s+being)\s+(?:a\s+|an\s+)?(?:(?:fully|full|strict|completely)\s+)?(?P<x>(?:{_DIET_RE}).*)$", "diet_start"),
    (rf"^(?:follow|follows|eat|eats|keep|keeps|stick\s+to|sticks\s+to)\s+(?P<x>(?:a\s+|an\s+)?(?:(?:strict|mostly)\s+)?(?:{_DIET_RE}).*)$", "diet"),
    (r"^(?:move|moves)\s+to\s+(?P<x>.*)$", "move_future"),
    (r"^(?:work|works)\s+(?:at|for|with)\s+(?P<x>.*)$", "work_at"),
    (r"^(?:worked)\s+(?:at|for)\s+(?P<x>.*)$", "worked_at"),
    (r"^(?:work|works)\s+as\s+(?:an?\s+)?(?P<x>.*)$", "work_as"),
    (r"^(?:got|landed|accepted|took|started|began)\s+(?:a\s+|my\s+|the\s+)?(?:new\s+|first\s+|dream\s+)?(?:job|position|role|internship|gig)\s+(?:at|with|in)\s+(?P<x>.*)$", "job_at"),
    (r"^(?:started|began)\s+(?:working|a\s+job)\s+(?:at|for)\s+(?P<x>.*)$", "job_at"),
    (r"^(?:quit|left)\s+(?:my\s+|the\s+)?(?:job|position|role|work)\s+(?:at|with)\s+(?P<x>.*)$", "quit_at"),
    (r"^(?:quit)\s+(?P<x>[A-Z].*)$", "quit_at"),
    (r"^(?:love|loves|like|likes|enjoy|enjoys|adore|adores|prefer|prefers|dig|digs|appreciate|appreciates)\s+(?P<x>.*)$", "like"),
    (r"^(?:hate|hates|dislike|dislikes|detest|detests|loathe|loathes|despise|despises)\s+(?P<x>.*)$", "hate"),
    (r"^cannot\s+(?:stand|bear|stomach)\s+(?P<x>.*)$", "hate"),
    (r"^(?:plan|plans|intend|intends|aim|aims)\s+(?:to|on)\s+(?P<x>.*)$", "plan"),
    (r"^(?:have|has)\s+(?:decided|chosen)\s+(?P<x>.*)$", "decide"),
    (r"^(?:decided|decide|chose|choose|picked|settled\s+on|went\s+with|opted\s+for|opted\s+to|committed\s+to|made\s+the\s+decision\s+to|made\s+a\s+decision\s+to)\b\s*(?P<x>.*)$", "decide"),
    (r"^(?:got\s+married|married)\b\s*(?:to\s+)?(?P<x>.*)$", "married"),
    (r"^(?:got\s+engaged)\b\s*(?:to\s+)?(?P<x>.*)$", "engaged"),
    (r"^(?:have|has|own|owns)\s+(?P<x>.*)$", "have"),
    (r"^(?:got|bought|adopted|rescued|purchased|welcomed)\s+(?P<x>.*)$", "acquire"),
    (r"^(?:sold|gave\s+away|lost|rehomed)\s+(?:my|our)\s+(?P<x>.*)$", "lose"),
    (r"^(?:visited|toured|explored)\s+(?P<x>.*)$", "visited"),
    (r"^(?:went|traveled|travelled|flew|drove|took\s+a\s+trip|went\s+on\s+a\s+trip|headed|made\s+it)\s+(?:back\s+|over\s+|down\s+|up\s+|out\s+)?to\s+(?P<x>.*)$", "went_to"),
    (r"^(?P<v>attended|participated\s+in|took\s+part\s+in|competed\s+in|performed\s+at|spoke\s+at|volunteered\s+at)\s+(?P<x>.*)$", "attended"),
    (r"^(?:ran|completed|finished|won)\s+(?P<x>(?:a|an|the|my\s+first|my)\s+.*)$", "completed"),
    (r"^went\s+(?P<x>[a-z]+ing(?:\s+[a-z]+ing)?)\b.*$", "did"),
    (r"^(?:started|began|took\s+up)\s+(?P<x>.*)$", "started"),
    (r"^joined\s+(?P<x>.*)$", "joined"),
    (r"^graduated\s+(?:from\s+)?(?P<x>.*)$", "graduated"),
    (r"^(?:speak|speaks)\s+(?P<x>.*)$", "speak"),
    (r"^(?:play|plays)\s+(?P<x>.*)$", "play"),
    (r"^(?:study|studies)\s+(?P<x>.*)$", "study"),
]]


def _verb(rest: str, subject: str, first: bool, neg: str | None, ctx: _Ctx, *, perfect: bool) -> None:
    for pattern, rule in _VERB_RULES:
        m = pattern.match(rest)
        if not m:
            continue
        x = m.group("x").strip()
        ctx.verb = m.groupdict().get("v")
        _VERB_HANDLERS[rule](ctx, subject, x, neg, perfect)
        return


def _h_live(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    place = _proper(x)
    if place:
        ctx.add(s, "lives_in", _bare(place), _say("lives_in", s, place, neg), negated=bool(neg),
                object_type="place", confidence=0.85)


def _h_lived(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    place = _proper(x)
    if place and not neg:
        span = ctx.date()
        ctx.add(s, "lived_in", _bare(place), f"{s} lived in {place}" + (f" {span.describe()}" if span else ""),
                object_type="place", confidence=0.75)


def _h_moved(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    """ "I moved to Y (from X)"."""
    place = _proper(x)
    if neg or not place:
        return
    m = re.match(r"^\s+(?:from|out\s+of)\s+(.*)$", x[len(place):])
    _move(ctx, s, _proper(m.group(1)) if m else None, place)


def _h_moved_from(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    """ "I moved from X (to Y)"."""
    origin = _proper(x)
    if neg or not origin:
        return
    m = re.match(r"^\s+(?:back\s+|over\s+)?to\s+(.*)$", x[len(origin):])
    _move(ctx, s, origin, _proper(m.group(1)) if m else None)


def _move(ctx: _Ctx, s: str, origin: str | None, dest: str | None) -> None:
    """A move, from the turn's date on: X (origin) is where s no longer lives, Y (dest) where
    s lives now."""
    span = ctx.date()
    when = f" {span.describe()}" if span else ""
    vf = span.start if span else None
    if origin:
        ctx.add(s, "moved_from", _bare(origin), f"{s} moved from {origin}" + (f" to {dest}" if dest else "") + when,
                valid_from=vf, object_type="place", confidence=0.85)
        ctx.add(s, "lives_in", _bare(origin), f"{s} no longer lives in {origin}", negated=True, valid_from=vf,
                object_type="place", confidence=0.75)
    if dest:
        ctx.add(s, "moved_to", _bare(dest), f"{s} moved to {dest}{when}", valid_from=vf,
                object_type="place", confidence=0.85)
        ctx.add(s, "lives_in", _bare(dest), f"{s} lives in {dest}", valid_from=vf,
                object_type="place", confidence=0.75)


def _diet(ctx: _Ctx, s: str, diet: str, tail: str, neg: str | None, *, started: bool = False) -> bool:
    """A diet fact when ``tail`` is empty or a time phrase; whether it was one."""
    if not _DIET_TAIL.match(tail):
        return False
    diet = diet.lower()
    diet = {"veggie": "vegetarian", "pescetarian": "pescatarian"}.get(diet, diet)
    span = ctx.date()
    vf = span.start if span and (started or re.match(r"^\s+since\b", tail, re.I)) else None
    if neg == "anymore":
        text = f"{s} is no longer {diet}"
    elif neg:
        text = f"{s} is not {diet}"
    elif started:
        text = f"{s} became {diet}" + (f" {span.describe()}" if span else "")
    else:
        text = f"{s} is {diet}"
    ctx.add(s, "diet", diet, text, negated=bool(neg), valid_from=vf if not neg else None,
            object_type="diet", confidence=0.85)
    return True


def _h_diet(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    m = re.match(rf"^(?:a\s+|an\s+)?(?:(?:strict|mostly)\s+)?(?P<d>{_DIET_RE})(?:\s+diet)?(?P<tail>.*)$", x, re.I)
    if m:
        _diet(ctx, s, m.group("d"), m.group("tail"), neg)


def _h_diet_start(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if neg:
        return
    m = re.match(rf"^(?P<d>{_DIET_RE})(?P<tail>.*)$", x, re.I)
    if m:
        _diet(ctx, s, m.group("d"), m.group("tail"), None, started=True)


def _h_move_future(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    pass  # "I move to X" without a tense marker: not understood


def _h_work_at(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    org = _proper(x)
    if org:
        ctx.add(s, "works_at", _bare(org), _say("works_at", s, org, neg), negated=bool(neg),
                object_type="organization", confidence=0.85)
        m = re.match(r"^\s+as\s+(?:an?\s+)?(.*)$", x[len(org):])
        if m:
            _works_as(ctx, s, m.group(1), neg)


def _h_worked_at(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    org = _proper(x)
    if org and not neg:
        ctx.add(s, "worked_at", _bare(org), f"{s} worked at {org}", object_type="organization",
                confidence=0.75)


def _h_work_as(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    _works_as(ctx, s, x, neg)


def _h_job_at(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    org = _proper(x)
    if org and not neg:
        span = ctx.date()
        ctx.add(s, "works_at", _bare(org), f"{s} works at {org}", valid_from=span.start if span else None,
                object_type="organization", confidence=0.8)


def _h_quit_at(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    org = _proper(x)
    if org and not neg:
        span = ctx.date()
        ctx.add(s, "works_at", _bare(org), f"{s} no longer works at {org}", negated=True,
                valid_from=span.start if span else None, object_type="organization", confidence=0.8)


def _h_like(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    _likes(ctx, s, x, negative=False, neg=neg)


def _h_hate(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    _likes(ctx, s, x, negative=True, neg=neg)


def _h_plan(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if neg == "anymore":
        _plan(ctx, s, x, strict=False, neg=neg)
    elif not neg:
        mm = re.match(r"^([a-z]+ing)\b(.*)$", x)
        _plan(ctx, s, _ungerund(mm.group(1)) + mm.group(2) if mm else x, strict=False)


def _h_decide(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if neg:
        return
    m = re.match(r"^to\s+(?P<vp>[a-z].*)$", x)
    if m:
        vp = _np(m.group("vp"), max_words=10, stop=_VP_STOP)
        if vp and vp.split()[0] not in _GENERIC_OBJECTS:
            span = ctx.date()
            ctx.add(s, "decided", vp, f"{s} decided to {vp}", type="decision",
                    valid_from=span.start if span else None, object_type="activity", confidence=0.8)
        return
    if re.match(r"^(?:that|whether|what|how|if|not)\b", x):
        return
    obj = _np(re.sub(r"^(?:on|for)\s+", "", x), max_words=6)
    if obj:
        span = ctx.date()
        ctx.add(s, "decided", _clean_object(obj), f"{s} chose {obj}", type="decision",
                valid_from=span.start if span else None, object_type="thing", confidence=0.75)


def _h_have(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    _has(ctx, s, x, neg, acquired=False, verb="has")


def _h_acquire(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if neg:
        return
    m = re.match(r"^(?:a\s+)?(?:new\s+)?(?:job|position|role)\s+(?:at|with)\s+(?P<org>.*)$", x)
    if m:
        _h_job_at(ctx, s, m.group("org"), neg, perfect)
        return
    verb = "got"
    for v in ("bought", "adopted", "rescued", "purchased", "welcomed"):
        if v in ctx.clause.split()[1:4] or v in ctx.clause:
            verb = v
            break
    _has(ctx, s, x, None, acquired=True, verb=verb)


def _h_lose(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if neg:
        return
    m = re.match(rf"^(?P<np>{_POSS_MODIFIERS}(?P<head>[a-z]+))\b", x, re.I)
    if m and m.group("head").lower() in _POSSESSIONS - {"kid", "kids", "child", "children", "son", "daughter",
                                                        "baby", "sister", "brother"}:
        obj = m.group("np").strip().lower()
        span = ctx.date()
        ctx.add(s, "has", obj, f"{s} no longer has {_article(obj)}", negated=True,
                valid_from=span.start if span else None, object_type="thing", confidence=0.75)


def _h_visited(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if not neg:
        _event(ctx, s, "visited", x, "visited", need_date=False)


def _h_went_to(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if neg:
        return
    if x[:1].isupper() or (x.startswith("the ") and x[4:5].isupper()):
        _event(ctx, s, "visited", x, "went to", need_date=False)
    else:
        _event(ctx, s, "attended", x, "went to", need_date=True)


def _h_attended(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if not neg:
        verb = " ".join((ctx.verb or "attended").split())
        _event(ctx, s, "attended", x, verb, need_date=False)


def _h_completed(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if neg:
        return
    verb = ctx.clause.split()
    obj = _np(x, max_words=6, stop=_EVENT_STOP)
    if not obj or not re.search(r"\b(?:marathon|race|5k|10k|half|triathlon|ultra|competition|tournament|"
                                r"championship|course|degree|program|programme|certification|hackathon|"
                                r"contest|award|prize|medal)\b", obj, re.I):
        return
    span = ctx.date()
    word = next((w for w in verb if w.lower() in ("ran", "completed", "finished", "won")), "completed")
    ctx.add(s, "completed", _clean_object(obj), f"{s} {word.lower()} {obj}" + (f" {span.describe()}" if span else ""),
            valid_from=span.start if span else None, object_type="event", confidence=0.75)


def _h_did(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if neg:
        return
    act = x.lower()
    if act not in _DID_ACTIVITIES and act.split()[0] not in _DID_ACTIVITIES:
        return
    span = ctx.date()
    if span is None:
        return
    ctx.add(s, "did", act, f"{s} went {act} {span.describe()}", valid_from=span.start,
            object_type="activity", confidence=0.75)


def _h_started(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if neg:
        return
    m = re.match(r"^(?:to\s+)?([a-z]+)\b", x)
    if not m:
        return
    if m.group(0).startswith("to "):
        x = _gerund(m.group(1)) + x[m.end():]
    obj = _np(x, max_words=6, stop=_EVENT_STOP)
    if not obj or obj.lower().split()[0] in {"to", "a", "an", "the"} and len(obj.split()) < 2:
        return
    if re.match(r"^(?:crying|laughing|thinking|feeling|wondering|getting|going|doing|being|talking|"
                r"looking|to|it|this|that|off|out|up|over)\b", obj, re.I):
        return
    span = ctx.date()
    ctx.add(s, "started", _clean_object(obj), f"{s} started {obj}" + (f" {span.describe()}" if span else ""),
            valid_from=span.start if span else None, object_type="activity", confidence=0.75)


def _h_joined(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if neg:
        return
    org = _proper(x) if x[:1].isupper() or (x.startswith("the ") and x[4:5].isupper()) else None
    obj = org or _np(x, max_words=6, stop=_EVENT_STOP)
    if not obj or (not org and not re.match(r"^(?:a|an|the)\s", obj)):
        return
    span = ctx.date()
    ctx.add(s, "joined", _bare(obj) if org else _clean_object(obj),
            f"{s} joined {obj}" + (f" {span.describe()}" if span else ""),
            valid_from=span.start if span else None, object_type="organization", confidence=0.75)


def _h_married(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if neg:
        return
    name = _names(x) if x else None
    if name:
        span = ctx.date()
        ctx.add(s, "is_married_to", name, f"{s} is married to {name}", valid_from=span.start if span else None,
                object_type="person", confidence=0.85)


def _h_engaged(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if neg:
        return
    name = _names(x) if x else None
    if name:
        span = ctx.date()
        ctx.add(s, "partner_of", name, f"{s} is engaged to {name}", valid_from=span.start if span else None,
                object_type="person", confidence=0.8)


def _h_graduated(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if neg:
        return
    org = _proper(x)
    if org:
        span = ctx.date()
        ctx.add(s, "graduated_from", _bare(org),
                f"{s} graduated from {org}" + (f" {span.describe()}" if span else ""),
                valid_from=span.start if span else None, object_type="organization", confidence=0.8)


def _h_speak(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    words = re.findall(r"[A-Z][a-z]+", _cut(x, _NP_STOP))
    langs = [w for w in words if w in _LANGUAGES and w != "Sign"]
    if not langs or re.match(r"^(?:to|with|about|at|for|of)\b", x):
        return
    for lang in langs:
        ctx.add(s, "speaks", lang, _say("speaks", s, lang, neg), negated=bool(neg), object_type="language",
                confidence=0.8)


def _h_play(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    obj = _cut(x, _EVENT_STOP).strip().lower()
    obj = _clean_object(obj, drop_article=False)
    if obj in _PLAYABLE:
        clean = _bare(obj)
        ctx.add(s, "plays", clean, _say("plays", s, obj, neg), negated=bool(neg), object_type="activity",
                confidence=0.8)


def _h_study(ctx: _Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if not neg or neg == "anymore":
        _studies(ctx, s, x, neg)


_VERB_HANDLERS: dict[str, Callable[[_Ctx, str, str, str | None, bool], None]] = {
    "live": _h_live, "lived": _h_lived, "moved": _h_moved, "move_future": _h_move_future,
    "moved_from": _h_moved_from, "diet": _h_diet, "diet_start": _h_diet_start,
    "work_at": _h_work_at, "worked_at": _h_worked_at, "work_as": _h_work_as, "job_at": _h_job_at,
    "quit_at": _h_quit_at, "like": _h_like, "hate": _h_hate, "plan": _h_plan, "decide": _h_decide,
    "have": _h_have, "acquire": _h_acquire, "lose": _h_lose, "visited": _h_visited,
    "went_to": _h_went_to, "attended": _h_attended, "completed": _h_completed, "did": _h_did,
    "started": _h_started, "joined": _h_joined, "married": _h_married, "engaged": _h_engaged,
    "graduated": _h_graduated, "speak": _h_speak, "play": _h_play, "study": _h_study,
}
