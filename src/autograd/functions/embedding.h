// Placeholder: this family is being written.
#pragma once
