"""The sink side: the transactional emitter and the records it produces (their sizes, either produce path), what a
sink partition holds and how far emission got, open transactions, transactional ids and dead letters."""
