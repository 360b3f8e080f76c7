"""What a document must pass: cleaning, the quality filters and deduplication."""
