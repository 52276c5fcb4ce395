"""LLM roles (Selector, Researcher, Coder, Critic) and their prompts."""
