"""A word of every script of the SIGMORPHON 2020 G2P data, for the tests of every layer."""

# language: (word, pronunciation)
WORDS = {
    "kor": ("가게", "k a̠ː ɡ e̞"),  # Hangul syllables: NFD makes them jamo
    "hin": ("अंकल", "ə ŋ k ə l"),  # Devanagari, with combining vowel signs
    "geo": ("ბავშვი", "b a v ʃ v i"),  # Georgian
    "arm": ("աղբյուր", "ɑ ʁ p j u ɾ"),  # Armenian
    "jpn": ("がっこう", "ɡ a k k o ː"),  # hiragana, a voiced mark that NFD separates
    "vie": ("a còng", "ʔ aː ˧˧ k a w ŋ͡m ˨˩"),  # a space inside the word, a tone mark
    "fre": ("œuf", "œ f"),
}
