"""evr1 pieces that plug into verl 0.9.x: agent loop, trainer mode, plugin entry point (imports verl).

Modules: plugin (entry point), agent_loop (`evr1_hybrid`), trainer (`evr1` V1 trainer mode), group_board.
"""
