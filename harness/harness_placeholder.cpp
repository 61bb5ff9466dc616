// Engine sources replace this file as they land.
namespace ckpt {}
