"""What every stage needs and none owns (docs/architecture.md's ``common/`` row): the error base class
(:mod:`.errors`), safe output files and atomic writes (:mod:`.files`), URL host keys and header
lookup (:mod:`.http`), loose text comparison (:mod:`.text`), the ``--resolve`` table's parser
(:mod:`.resolve`) and the local certificate authority (:mod:`.ca`). Imports nothing else of
webfreeze's; every stage may import it."""
