# Strict warnings for Loom's own code (not for generated protobuf code).
function(loom_strict target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror)
endfunction()
