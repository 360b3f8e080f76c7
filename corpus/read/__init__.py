"""What documents come from: the sources a build reads, and the canonical form of their text."""
