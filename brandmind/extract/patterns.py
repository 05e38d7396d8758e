"""The rules extractor's data: its lexicons, the regular expressions it is built from, and
the table of verb patterns (see ``brandmind.extract.rules`` for what it extracts).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# -- lexicons -------------------------------------------------------------------------------
NOT_NAMES = {
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
NATIONALITIES = {
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
JOBS = {
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
JOB_SUFFIXES = ("ologist", "ician", "grapher", "ographer")
BAD_JOB_MODIFIERS = {
    "good", "great", "bad", "terrible", "decent", "amazing", "awesome", "excellent", "huge", "big",
    "lousy", "poor", "better", "best", "worse", "worst", "horrible", "natural", "born", "pretty",
    "real", "little", "bit", "total", "complete", "fan", "wannabe", "aspiring", "future", "former",
    "ex", "retired", "failed", "frustrated", "struggling", "hopeless", "okay", "ok", "fine", "fast",
    "slow", "lazy", "picky", "messy", "type", "kind", "sort",
}
POSSESSIONS = {
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
POSS_MODIFIERS = r"(?:(?:new|old|little|big|small|huge|cute|adorable|sweet|young|rescue|used|second-?hand|electric|vintage|beautiful|lovely|golden|black|white|brown|grey|gray|red|blue|green|tiny|own|first|second|third|pet|family|labrador|beagle|poodle|husky|persian|siamese|tabby|acoustic|classical|grand|digital|3-bedroom|two-bedroom|one-bedroom|small|lake|beach|country)\s+){0,3}"
REL_NOUNS: dict[str, tuple[str, str]] = {
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
PETS = ("dog", "cat", "puppy", "kitten", "bird", "parrot", "hamster", "rabbit", "bunny", "horse",
         "pony", "turtle", "tortoise", "snake", "lizard", "gecko", "ferret", "fish", "goldfish", "pup")
LANGUAGES = {
    "English", "Spanish", "French", "German", "Italian", "Portuguese", "Dutch", "Swedish",
    "Norwegian", "Danish", "Finnish", "Polish", "Czech", "Greek", "Turkish", "Russian", "Ukrainian",
    "Arabic", "Hebrew", "Hindi", "Urdu", "Bengali", "Punjabi", "Tamil", "Chinese", "Mandarin",
    "Cantonese", "Japanese", "Korean", "Vietnamese", "Thai", "Indonesian", "Malay", "Tagalog",
    "Swahili", "Persian", "Farsi", "Romanian", "Hungarian", "Latin", "Catalan", "Basque", "Irish",
    "Welsh", "Sign", "ASL",
}
PLAYABLE = {
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
DIET_RE = "|".join(re.escape(d) for d in _DIETS)
# what may follow the diet word: nothing, or a time ("since 2019", "for ten years", "now")
DIET_TAIL = re.compile(r"^(?:\s+(?:now|too|also|as well|these days|since\s+.+|for\s+.+|(?:last|this|in)\s+.+|"
                        r"\d+\s+\w+\s+ago|a\s+\w+\s+ago|ago))?\s*$", re.I)
DID_ACTIVITIES = {
    "hiking", "camping", "swimming", "shopping", "fishing", "skiing", "snowboarding", "surfing",
    "running", "jogging", "biking", "cycling", "kayaking", "canoeing", "climbing", "rock climbing",
    "bowling", "dancing", "sailing", "skating", "ice skating", "horseback riding", "diving",
    "scuba diving", "snorkeling", "paddleboarding", "backpacking", "birdwatching", "hunting",
    "sightseeing", "trekking", "rafting", "golfing", "clubbing", "caroling", "apple picking",
    "berry picking", "stargazing", "boating", "roller skating", "sledding", "painting",
}
PLAN_VERBS = {
    "start", "move", "visit", "travel", "go", "join", "quit", "leave", "marry", "buy", "sell",
    "learn", "study", "take", "run", "attend", "fly", "adopt", "retire", "launch", "build", "open",
    "apply", "begin", "switch", "get", "have", "host", "organize", "organise", "throw", "plan",
    "celebrate", "compete", "enter", "enroll", "sign", "volunteer", "write", "publish", "record",
    "renovate", "paint", "hike", "climb", "explore", "spend", "work", "change", "finish", "graduate",
    "become", "try", "see", "meet", "perform", "teach", "visit", "camp", "drive", "cook", "bake",
}
GENERIC_OBJECTS = {
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
CLAUSE_WORDS = {"it", "it's", "its", "them", "they", "they're", "you", "you're", "your", "he", "she",
                 "him", "her", "we", "i", "i'm", "this", "that", "these", "those", "is", "are", "was",
                 "were", "be", "been", "am", "what", "which", "who", "how", "why", "when", "where",
                 "whatever", "something", "anything", "everything", "someone", "anyone", "he's",
                 "she's", "there's", "that's", "what's", "can", "will", "would", "should", "could"}
DANGLING = {"about", "to", "with", "for", "of", "at", "in", "on", "from", "by", "how", "the", "a", "an",
             "and", "or", "my", "your", "our", "what", "that", "than", "as", "into", "like", "some",
             "more", "so", "very", "really", "just", "even", "every", "each", "all", "its", "his", "her"}
FILLER_TAIL = re.compile(
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
NAME = r"[A-Z][a-z]+(?:[-'][A-Z][a-z]+)?(?:\s+[A-Z][a-z]+(?:[-'][A-Z][a-z]+)?)?"
NAME_RE = re.compile(NAME)
PROPER_RE = re.compile(_PROPER)
ADVERBS = re.compile(
    r"^(?:(?:really|also|still|currently|now|actually|just|recently|finally|totally|absolutely|"
    r"definitely|truly|honestly|kind of|sort of|kinda|sorta|pretty much|even|already|officially|"
    r"both|all|literally|seriously|genuinely|certainly|simply|mostly|mainly|basically|happily|"
    r"proudly|newly|originally|also now|now also|personally|secretly|kinda|luckily|fortunately|"
    r"unfortunately|sadly|recently just|just recently|then|currently still|once again|again)"
    r"\s+)+", re.I)
INTRO = re.compile(
    r"^(?:(?:well|oh|ooh|yeah|yes|yep|yup|no|nope|nah|actually|so|also|and|but|anyway|anyways|btw|"
    r"by the way|honestly|haha+|hehe+|lol|um+|uh+|hmm+|ok|okay|now|guess what|fun fact|hey|hi|hello|"
    r"wow|sure|right|of course|in fact|you know|as you know|as i said|like i said|funny enough|"
    r"to be honest|tbh|omg|oh my god|oh yeah|ah+|aw+|true|exactly|absolutely|totally|indeed|"
    r"thanks|thank you|good news|news|update|recently|lately|these days|nowadays|currently|"
    r"right now|at the moment|since then|luckily|fortunately|unfortunately|sadly|besides|plus|"
    r"speaking of which|for what it's worth|in any case|then|also now|just so you know|fyi|"
    r"first|firstly|second|secondly|finally|lastly|meanwhile|otherwise|however|still)"
    r"(?:\s*[,!.:;\-—–]+\s*|\s+))+", re.I)
QUESTION_START = re.compile(
    r"^(?:do|does|did|am|are|is|was|were|have|has|can|could|would|will|should|shall|what|where|who|"
    r"whom|whose|why|how|when|which|ever)\s+(?:you|he|she|they|we|it|there|i|your|u|ya|anyone|"
    r"anybody|someone|my|our)\b", re.I)
# a trailing "..., what's yours?" after a statement ("My name is Dana, and you?")
TAG_QUESTION = re.compile(
    r"[,;]?\s*(?:and\s+you|and\s+yours|what\s+about\s+you|how\s+about\s+you|what(?:'s|\s+is)\s+yours|"
    r"how\s+are\s+you(?:\s+doing)?(?:\s+today)?|and\s+your\s+name|what(?:'s|\s+is)\s+your\s+name)\s*\?+\s*$",
    re.I)
AUX_START = re.compile(r"^(?:do|does|did|am|are|is|was|were|have|has|can|could|would|will|should|shall|"
                        r"what|where|who|whom|whose|why|how|when|which|may|might|must)\b", re.I)
HYPOTHETICAL_SENTENCE = re.compile(
    r"\b(?:if|unless|whether|imagine|imagining|suppose|supposing|pretend|pretending|hypothetically|"
    r"what if|wish|wished|wishing|dream|dreams|dreamed|dreamt|dreaming|fantasize|fantasise|"
    r"in theory|theoretically|role-?play|roleplaying|joke|joking|kidding)\b",
    re.I)
REPORTED = re.compile(
    r"\b(?:said|says|say|saying|told|tells|tell|telling|asked|asks|ask|asking|claims?|claimed|"
    r"heard|hear|thinks?|thought|believes?|believed|according|mentioned|mentions|wrote|writes|"
    r"rumou?r|supposedly|apparently|allegedly|quote|quoted|reckon)\b", re.I)
HYPOTHETICAL_CLAUSE = re.compile(
    r"(?-i:\bmay\b)|\b(?:would|could|might|maybe|perhaps|possibly|probably|should|shall|ought|must|can|"
    r"hope|hopes|hoped|hoping|want|wants|wanted|wanna|wish|need to|needs to|considering|"
    r"thinking about|thinking of|not sure|unsure|someday|one day|some day|eventually|"
    r"try to|trying to|tried to|almost|nearly|supposed to|pretend|i'd|we'd)\b", re.I)
ANYMORE = re.compile(r"\s*\b(?:anymore|any more|any longer|no more)\b", re.I)
CONTRACTION = re.compile(
    r"\b(?:(?P<i>[Ii])['’](?P<iv>m|ve|ll|d)|(?P<we>[Ww]e)['’](?P<wev>re|ve|ll|d)|(?P<cant>[Cc]an['’]?t)|"
    r"(?P<wont>[Ww]on['’]t)|(?P<aux>do|does|did|is|are|was|were|have|has|had)n['’]t|"
    r"(?P<bare>dont|doesnt|didnt|isnt|arent|wasnt)|(?P<gonna>gonna)|(?P<wanna>wanna)|"
    r"(?P<name>name)['’]s|(?P<fav>favou?rite)|(?P<got>(?:I|[Ww]e)\s+have\s+got))\b", re.I)
HAVE_GOT = re.compile(r"\b(I|[Ww]e)\s+have\s+got\b")
_VERBS_AFTER = {"m": "am", "ve": "have", "ll": "will", "d": "would", "re": "are"}
_BARE = {"dont": "do not", "doesnt": "does not", "didnt": "did not", "isnt": "is not",
         "arent": "are not", "wasnt": "was not"}


def expand(m: re.Match[str]) -> str:
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


QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”|„[^“”]*[“”]|«[^»]*»")
SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[\"“A-Z0-9(])|\n+|(?<=[!?])(?=[A-Z])")
CLAUSE_SPLIT = re.compile(
    r"\s*;\s*|\s*[–—]\s+|\s*,?\s+(?:and|but|so|because|cause|cuz|although|though|while|whereas|plus|since|"
    r"and also|and now|but now|and then)\s+(?=(?:I|i|we|We|[Mm]y|[Oo]ur)\b)|,\s+(?=(?:I|i|we|We)\s)")
CONTINUATION = re.compile(
    r"\s*,?\s+(?:and|but)\s+(?=(?:also\s+|now\s+|still\s+|even\s+|currently\s+)?"
    r"(?:live|lives|work|works|love|loves|like|likes|enjoy|enjoys|have|has|own|owns|hate|hates|"
    r"moved|visited|attended|went|play|plays|speak|speaks|am|is|are|adopted|bought|got|joined|"
    r"started|decided|plan|plans|study|studies)\b)")
_STOP = (r"[,.;:!?()\[\]\"“”]|\s[-–—]\s|\s(?:because|cause|cuz|since|but|so|when|whenever|while|until|after|"
         r"before|as|though|although|if|unless|which|who|whom|whose|where|and then|or something|lol|"
         r"haha\w*|hehe\w*|and i|and we|but i|and my|whereas|plus|btw|tbh)\b")
NP_STOP = re.compile(_STOP + r"|\s(?:with|for|during|every|each|these days|right now|at the moment|"
                               r"all the time|anymore|any more|instead|though)\b", re.I)
EVENT_STOP = re.compile(_STOP + r"|\s(?:with|for|last|this|next|on|in|at|during|yesterday|today|"
                                  r"tomorrow|tonight|ago|and|to|from|by|where|over|around|together)\b", re.I)
VP_STOP = re.compile(_STOP + r"|\s(?:with my|together|for sure|for real)\b", re.I)
MY_RE = re.compile(r"\b(?:my|our)\b")
ME_RE = re.compile(r"\b(?:me|us|myself|ourselves)\b")
# verb forms: (third person, base form) used to word negated facts
SAY_FORMS: dict[str, tuple[str, str]] = {
    "lives_in": ("lives in", "live in"), "works_at": ("works at", "work at"),
    "likes": ("likes", "like"), "dislikes": ("dislikes", "dislike"), "has": ("has", "have"),
    "studies": ("studies", "study"), "studies_at": ("studies at", "study at"),
    "speaks": ("speaks", "speak"), "plays": ("plays", "play"), "plans": ("plans to", "plan to"),
}
STARTS_WITH_SUBJECT = re.compile(r"(?:I|i|[Ww]e|[Mm]y|[Oo]ur)\s")
SUBJECT_AHEAD = re.compile(r"\s(?:I|i|we|We)\s")
SUBJECT_PREFIX = re.compile(rf"^(?:I|i|[Ww]e|{NAME})(?=\s)")


# -- relations, pets and names found anywhere in a sentence ----------------------------------
_REL_RE = "|".join(sorted((re.escape(k) for k in REL_NOUNS), key=len, reverse=True))
_REL_MOD = r"(?:(?:best|close|old|childhood|oldest|youngest|older|younger|little|big|baby|twin|dear|lovely|amazing|beautiful|wonderful|awesome|good|great|new|current|college|school|work|high school|step-?)\s+){0,2}"
_NO_EX = r"(?<!ex-)(?<!\bex )(?<!\blate )(?<!\bformer )(?<!\bdeceased )"
MY_REL_NAME = re.compile(rf"\b(?:[Mm]y|[Oo]ur)\s+{_REL_MOD}{_NO_EX}(?P<rel>{_REL_RE})(?:,\s*|\s+)(?:named\s+|called\s+)?(?P<name>{NAME})")
MY_REL_IS_NAME = re.compile(
    rf"\b(?:[Mm]y|[Oo]ur)\s+{_REL_MOD}{_NO_EX}(?P<rel>{_REL_RE})(?:'s\s+name\s+is|\s+is\s+called|\s+is\s+named|,?\s+whose\s+name\s+is|\s+is)\s+(?P<name>{NAME})")
NAME_IS_MY_REL = re.compile(
    rf"(?:^|[,;]\s*|\band\s+)(?P<name>{NAME}),?\s+is\s+(?:also\s+)?(?:[Mm]y|[Oo]ur)\s+{_REL_MOD}(?P<rel>{_REL_RE})\b(?!['-])")
NAMES_REL_NAME = re.compile(
    rf"\b(?P<subj>{NAME})'s\s+{_REL_MOD}{_NO_EX}(?P<rel>{_REL_RE})(?:,\s*|\s+)(?:named\s+|called\s+)?(?P<name>{NAME})")
_PET_RE = "|".join(PETS)
MY_PET_NAME = re.compile(
    rf"\b(?:[Mm]y|[Oo]ur)\s+{POSS_MODIFIERS}(?P<pet>{_PET_RE})(?:'s\s+name\s+is|\s+is\s+called|\s+is\s+named|,\s*|\s+)(?:named\s+|called\s+)?(?P<name>{NAME})")
CALL_ME = re.compile(
    rf"\b(?:(?:[Ee]veryone|[Ee]verybody|[Pp]eople|[Mm]ost people|[Mm]y friends|[Ff]riends|[Tt]hey)\s+calls?|"
    rf"[Cc]all)\s+me\s+(?P<name>{NAME})")
GO_BY = re.compile(rf"\b(?:I|[Ww]e)\s+(?:usually\s+|mostly\s+|just\s+)?go\s+by\s+(?P<name>{NAME})")
MY_NAME = re.compile(rf"\b[Mm]y\s+(?:first\s+|full\s+|real\s+)?name\s+is\s+(?P<name>{NAME})")
# "my name is dana" (lower case): one word ending the clause, not an adjective
MY_NAME_LOWER = re.compile(
    r"\b[Mm]y\s+(?:first\s+|real\s+)?name\s+is\s+(?P<name>[a-z][a-z'-]{1,20})"
    r"(?=\s*(?:$|[,.!;]|\s+(?:and|but|btw|by the way)\b))")
NOT_LOWER_NAMES = {
    "not", "secret", "long", "weird", "private", "irrelevant", "unimportant", "unusual", "common", "rare",
    "hard", "difficult", "easy", "simple", "short", "funny", "complicated", "pronounced", "spelled",
    "same", "different", "unique", "mine", "fine", "nothing", "none", "whatever", "unknown", "anonymous",
    "classified", "confidential", "important", "boring", "cool", "nice", "great", "pretty", "beautiful",
    "lovely", "ugly", "strange", "odd", "here", "there", "above", "below", "changing", "changed",
    "legal", "official", "old", "new", "real", "fake", "famous", "popular", "traditional", "hidden",
}
# a negation or request just before "call me" ("please don't call me Dana", "never call me X")
NAME_NEGATED = re.compile(r"(?:\bnot|\bnever|\bnobody|\bno one|\bstop|\bno longer)\s+(?:\w+\s+){0,2}$", re.I)
_MONTH_RE = ("(?:January|February|March|April|May|June|July|August|September|October|November|December|"
             "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)")
_DAY_RE = r"(?P<{0}>[0-3]?\d)(?:st|nd|rd|th)?"
CAL_DATE = re.compile(
    rf"^(?:on\s+)?(?:(?:the\s+)?{_DAY_RE.format('d1')}\s+(?:of\s+)?(?P<m1>{_MONTH_RE})\.?|"
    rf"(?P<m2>{_MONTH_RE})\.?\s+(?:the\s+)?{_DAY_RE.format('d2')})(?:,?\s+(?P<y>(?:19|20)\d\d))?"
    r"(?=\s*(?:$|[,.!;]|\s+(?:and|but|so|btw|by the way|actually|too)\b))", re.I)
BIRTHDAY = re.compile(
    rf"\b(?P<who>[Mm]y|{NAME}'s)\s+(?:birthday|bday|b-day|date of birth)(?:'s|\s+is|\s+was|\s+falls\s+on)\s+"
    r"(?P<rest>.*)$")
FAVORITE = re.compile(
    r"\b(?P<who>[Mm]y|[Oo]ur)\s+(?:absolute\s+|all-time\s+|new\s+)?favorite\s+(?P<what>[a-z]+(?:\s+[a-z]+)?)\s+(?:is|are|has to be|would have to be)\s+(?P<obj>[^,.;!?]+)")
ANYWHERE_HINT = re.compile(r"\b(?:[Mm]y|[Oo]ur)\b|'s\b|\b[Cc]alls? me\b|\bgo by\b")


# -- one clause -------------------------------------------------------------------------------
FIRST = re.compile(r"^(?:I|i|[Ww]e)\s+")
THIRD_OK = {"is", "was", "has", "does", "no", "used", "will", "just", "also", "still", "recently",
             "finally", "really", "actually", "now", "currently", "never", "got", "went", "ran", "won",
             "began", "took", "sold", "bought", "chose", "left", "quit", "flew", "drove", "gave", "lost",
             "made", "spoke", "always", "loves", "lives"}
THIRD = re.compile(rf"^(?P<name>{NAME})\s+")
_ITEM = r"[A-Za-z][\w'-]*(?:\s+[A-Za-z][\w'-]*){0,2}"
LIST_RE = re.compile(rf"{_ITEM}(?:,\s*{_ITEM})+,?\s+(?:and|or)\s+{_ITEM}(?=\s*(?:$|[.;!?]))")
# -- the verb table ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Simple:
    """A verb pattern whose one fact needs no handler of its own (see ``verbs.simple_fact``):
    the object is the capitalised place or organisation (``take="place"``, stored without
    "the") or the person's name (``take="name"``) the pattern's ``x`` starts with.

    ``text`` words the fact ("{s} worked at {o}{when}"; ``{when}``: " on 5 May 2024" when the
    clause has a date); a ``negatable`` pattern also takes "I don't / no longer ..." (the
    fact negated, worded from ``SAY_FORMS``), any other yields nothing when negated; ``dated``
    facts are valid from the clause's date; ``negated`` ones state an end ("I quit my job at X").
    """

    predicate: str
    take: str
    text: str
    object_type: str
    confidence: float
    negatable: bool = False
    dated: bool = False
    negated: bool = False


LIVES_IN = Simple("lives_in", "place", "", "place", 0.85, negatable=True)
LIVED_IN = Simple("lived_in", "place", "{s} lived in {o}{when}", "place", 0.75)
WORKED_AT = Simple("worked_at", "place", "{s} worked at {o}", "organization", 0.75)
JOB_AT = Simple("works_at", "place", "{s} works at {o}", "organization", 0.8, dated=True)
QUIT_AT = Simple("works_at", "place", "{s} no longer works at {o}", "organization", 0.8, dated=True, negated=True)
MARRIED = Simple("is_married_to", "name", "{s} is married to {o}", "person", 0.85, dated=True)
ENGAGED = Simple("partner_of", "name", "{s} is engaged to {o}", "person", 0.8, dated=True)
GRADUATED = Simple("graduated_from", "place", "{s} graduated from {o}{when}", "organization", 0.8, dated=True)

# (pattern, rule), tried in order on what follows the subject (and its negation and tense);
# the first that matches decides.  The rule is a Simple fact or the name of a handler in
# verbs.VERB_HANDLERS; the pattern's group ``x`` is the rest of the clause (``v``: the verb).
VERB_RULES: list[tuple[re.Pattern[str], Simple | str]] = [(re.compile(p, re.I), rule) for p, rule in [
    (r"^(?:live|lives|reside|resides)\s+in\s+(?P<x>.*)$", LIVES_IN),
    (r"^(?:lived)\s+in\s+(?P<x>.*)$", LIVED_IN),
    (r"^(?:just\s+|recently\s+|finally\s+|officially\s+)?(?:moved|relocated)\s+(?:back\s+|here\s+|over\s+)?to\s+(?P<x>.*)$", "moved"),
    (r"^(?:just\s+|recently\s+|finally\s+|officially\s+)?(?:moved|relocated)\s+(?:back\s+|here\s+|over\s+|away\s+|out\s+)?(?:from|out\s+of)\s+(?P<x>.*)$", "moved_from"),
    (rf"^(?:went|became|turned|switched\s+to\s+being|gone|become|started\s+being)\s+(?:a\s+|an\s+)?(?:(?:fully|full|strict|completely)\s+)?(?P<x>(?:{DIET_RE}).*)$", "diet_start"),
    (rf"^(?:follow|follows|eat|eats|keep|keeps|stick\s+to|sticks\s+to)\s+(?P<x>(?:a\s+|an\s+)?(?:(?:strict|mostly)\s+)?(?:{DIET_RE}).*)$", "diet"),
    (r"^(?:move|moves)\s+to\s+(?P<x>.*)$", "move_future"),
    (r"^(?:work|works)\s+(?:at|for|with)\s+(?P<x>.*)$", "work_at"),
    (r"^(?:worked)\s+(?:at|for)\s+(?P<x>.*)$", WORKED_AT),
    (r"^(?:work|works)\s+as\s+(?:an?\s+)?(?P<x>.*)$", "work_as"),
    (r"^(?:got|landed|accepted|took|started|began)\s+(?:a\s+|my\s+|the\s+)?(?:new\s+|first\s+|dream\s+)?(?:job|position|role|internship|gig)\s+(?:at|with|in)\s+(?P<x>.*)$", JOB_AT),
    (r"^(?:started|began)\s+(?:working|a\s+job)\s+(?:at|for)\s+(?P<x>.*)$", JOB_AT),
    (r"^(?:quit|left)\s+(?:my\s+|the\s+)?(?:job|position|role|work)\s+(?:at|with)\s+(?P<x>.*)$", QUIT_AT),
    (r"^(?:quit)\s+(?P<x>[A-Z].*)$", QUIT_AT),
    (r"^(?:love|loves|like|likes|enjoy|enjoys|adore|adores|prefer|prefers|dig|digs|appreciate|appreciates)\s+(?P<x>.*)$", "like"),
    (r"^(?:hate|hates|dislike|dislikes|detest|detests|loathe|loathes|despise|despises)\s+(?P<x>.*)$", "hate"),
    (r"^cannot\s+(?:stand|bear|stomach)\s+(?P<x>.*)$", "hate"),
    (r"^(?:plan|plans|intend|intends|aim|aims)\s+(?:to|on)\s+(?P<x>.*)$", "plan"),
    (r"^(?:have|has)\s+(?:decided|chosen)\s+(?P<x>.*)$", "decide"),
    (r"^(?:decided|decide|chose|choose|picked|settled\s+on|went\s+with|opted\s+for|opted\s+to|committed\s+to|made\s+the\s+decision\s+to|made\s+a\s+decision\s+to)\b\s*(?P<x>.*)$", "decide"),
    (r"^(?:got\s+married|married)\b\s*(?:to\s+)?(?P<x>.*)$", MARRIED),
    (r"^(?:got\s+engaged)\b\s*(?:to\s+)?(?P<x>.*)$", ENGAGED),
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
    (r"^graduated\s+(?:from\s+)?(?P<x>.*)$", GRADUATED),
    (r"^(?:speak|speaks)\s+(?P<x>.*)$", "speak"),
    (r"^(?:play|plays)\s+(?P<x>.*)$", "play"),
    (r"^(?:study|studies)\s+(?P<x>.*)$", "study"),
]]
