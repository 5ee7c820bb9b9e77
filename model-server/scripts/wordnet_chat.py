"""WordNet 3.0 glosses -> chat conversations (the bundled model's training text).

Reads the four `data.*` files of Debian's `wordnet-base` package (WordNet 3.0
license: free to use, copy, modify and distribute with its notice) and turns
each synset into short question/answer turns in ChatML form:

    <|im_start|>user\nWhat does "fold" mean?<|im_end|>\n<|im_start|>assistant\n...<|im_end|>\n

Deterministic for a given seed. No third-party imports (runs anywhere).
"""
import os
import random
import re

POS_FILES = {"noun": "data.noun", "verb": "data.verb", "adj": "data.adj", "adv": "data.adv"}
SYSTEM = "You are a helpful assistant."


def read_synsets(wordnet_dir: str):
    """Yields (pos, [lemmas], definition, [examples])."""
    for pos, name in POS_FILES.items():
        with open(os.path.join(wordnet_dir, name), encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("  ") or "|" not in line:
                    continue  # license header
                head, gloss = line.split("|", 1)
                fields = head.split()
                count = int(fields[3], 16)
                lemmas = []
                for i in range(count):
                    w = re.sub(r"\(.*?\)$", "", fields[4 + 2 * i]).replace("_", " ").strip()
                    if w and w not in lemmas:
                        lemmas.append(w)
                gloss = gloss.strip()
                examples = [e.strip() for e in re.findall(r'"([^"]+)"', gloss) if len(e.strip()) > 3]
                definition = gloss.split('"', 1)[0].strip().rstrip(";").strip()
                definition = re.sub(r"\s+", " ", definition)
                if lemmas and definition:
                    yield pos, lemmas, definition, examples


def sentence(s: str) -> str:
    s = s.strip()
    if not s:
        return s
    s = s[0].upper() + s[1:]
    return s if s[-1] in ".!?" else s + "."


def article(w: str) -> str:
    return "an" if w[:1].lower() in "aeiou" else "a"


def turns_for(pos: str, lemmas: list, definition: str, examples: list, rng: random.Random):
    """One or two (question, answer) pairs for a synset."""
    w = rng.choice(lemmas[:3])
    others = [x for x in lemmas if x != w]
    if pos == "verb":
        q = rng.choice([f'What does "{w}" mean?', f"What does it mean to {w}?", f"Define the verb {w}.", f"What is the meaning of {w}?"])
        a = f"To {w} means to {definition}."
    elif pos == "noun":
        q = rng.choice([f"What is {article(w)} {w}?", f'What does "{w}" mean?', f"Define {w}.", f"What is the meaning of {w}?", f"Tell me what {w} is."])
        a = f'The word "{w}" means {definition}.' if rng.random() < 0.5 else f"{sentence(article(w) + ' ' + w)[:-1]} is {definition}."
    else:
        kind = "adjective" if pos == "adj" else "adverb"
        q = rng.choice([f'What does "{w}" mean?', f"Define the {kind} {w}.", f"What is the meaning of {w}?"])
        a = f'"{sentence(w)[:-1]}" means {definition}.'
    if examples and rng.random() < 0.6:
        a += f' For example: "{sentence(rng.choice(examples))}"'
    if others and rng.random() < 0.4:
        a += f" Other words for it are {', '.join(others[:3])}." if len(others) > 1 else f" Another word for it is {others[0]}."
    out = [(q, a)]
    if examples and rng.random() < 0.25:
        out.append((f'Use "{w}" in a sentence.', sentence(rng.choice(examples))))
    if others and rng.random() < 0.15:
        out.append((f"What is another word for {w}?", f"Another word for {w} is {rng.choice(others)}."))
    return out


def render(turns: list, system: bool) -> str:
    """ChatML text, exactly what tokenizer_config.json's chat template renders."""
    parts = []
    if system:
        parts.append(f"<|im_start|>system\n{SYSTEM}<|im_end|>\n")
    for q, a in turns:
        parts.append(f"<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n{a}<|im_end|>\n")
    return "".join(parts)


def conversations(wordnet_dir: str, seed: int = 0) -> list:
    rng = random.Random(seed)
    convs = []
    for pos, lemmas, definition, examples in read_synsets(wordnet_dir):
        turns = turns_for(pos, lemmas, definition, examples, rng)
        convs.append(render(turns, system=rng.random() < 0.1))
    rng.shuffle(convs)
    return convs


CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


if __name__ == "__main__":
    import sys

    cs = conversations(sys.argv[1])
    print(len(cs), sum(len(c) for c in cs))
    for c in cs[:6]:
        print(c)
