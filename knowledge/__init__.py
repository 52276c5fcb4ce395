"""The knowledge base: GPU literature and experiment findings in Chroma."""
