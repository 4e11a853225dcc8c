"""tfscones: sequence-to-sequence models whose output layer handles ambiguity.

Output heads (softmax, SCONES sigmoid, entmax), their Keras losses, Transformer models,
head-aware decoders and SavedModel export. See README.md and DESIGN notes in the repository.
"""

__version__ = "0.1.0"
